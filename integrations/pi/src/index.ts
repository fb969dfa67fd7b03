/**
 * slack-ask for Pi: an `ask` tool whose questions are answered by people in Slack.
 *
 * The tool pushes one ask envelope onto the bot's Redis stream (`XADD P:asks * ask <json>`) and
 * waits for the one result the bot pushes onto the ask's reply list (`BLPOP`), as the wire protocol
 * says (docs/protocol.md in the slack-ask repository). The model gets the bot's `text` and `details`
 * exactly as the bot wrote them: they are pi-question's narration and `buildDetails`, so prompts
 * written for pi-question's own `ask` tool keep working. The request is not checked here: the bot
 * runs the question contract and answers an invalid request with its exact `invalid_request` message.
 *
 * Three endings do not wait for the bot without bound. An abort (or Pi's session shutdown) sends
 * a `cancel` and returns the bot's own `(cancelled)` result when it comes within half a second,
 * else the contract's `(cancelled)` line written here. The client-side deadline (the ask's own
 * deadline plus a margin, for example when no bot is running) sends a `cancel` and returns the
 * contract's `(timeout)` line. Redis unreachable gives one `Error: ...` line within a few seconds.
 *
 * Redis is only contacted during a tool call, and every connection a call opens is closed before
 * the call returns (and on Pi's `session_shutdown`), so `pi -p` exits by itself.
 *
 * Configuration (environment, read when Pi loads the extension):
 *   REDIS_URL                    redis://localhost:6379/0
 *   SLACK_ASK_PREFIX             slack-ask (the bot's key prefix)
 *   SLACK_ASK_CHANNEL / SLACK_ASK_USER / SLACK_ASK_POLICY
 *                                the route; none set: the bot's default route (SLACK_ASK_DEFAULT_CHANNEL)
 *   SLACK_ASK_TIMEOUT_MS         1800000 (30 minutes): the ask's deadline
 *   SLACK_ASK_ON_TIMEOUT         unset (the bot's default, cancel), or cancel | recommended | error
 *   SLACK_ASK_CLIENT_MARGIN_MS   120000: how long after the deadline the tool stops waiting for the bot
 *   SLACK_ASK_REQUESTER          pi: the requester name shown in Slack
 */

import { randomUUID } from "node:crypto";

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Redis, type RedisOptions } from "ioredis";
import { Type, type Static, type TSchema } from "typebox";

// ---------------------------------------------------------------------------------------------
// The tool's parameters: the question contract's request (pi-question's `AskRequest`).

function stringEnum<T extends string>(values: readonly T[], description: string) {
  // A plain string enum ({"type": "string", "enum": [...]}): Google's API refuses anyOf of literals.
  return Type.Unsafe<T>({ type: "string", enum: [...values], description } as unknown as TSchema);
}

const OptionSchema = Type.Object({
  label: Type.String({ minLength: 1, description: "The choice as the person sees it." }),
  description: Type.Optional(Type.String({ description: "One line that explains the choice." })),
});

const QuestionSchema = Type.Object({
  id: Type.String({
    minLength: 1,
    description: "Stable id, unique within this ask; the answer lines start with it (`<id>: <answer>`).",
  }),
  question: Type.String({ minLength: 1, description: "The question itself, one sentence." }),
  description: Type.Optional(
    Type.String({ description: "Optional Markdown context shown under the question." }),
  ),
  options: Type.Array(OptionSchema, {
    minItems: 1,
    maxItems: 12,
    description: "1 to 12 choices. Do not add an 'Other' choice: allowCustom offers free text.",
  }),
  multi: Type.Optional(Type.Boolean({ description: "Allow more than one choice (default false)." })),
  recommended: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 11, description: "Zero-based index of the recommended option." }),
  ),
  allowCustom: Type.Optional(
    Type.Boolean({ description: "Offer free text besides the options (default true)." }),
  ),
  category: Type.Optional(
    stringEnum(
      ["implementation", "scope-product", "security-permission"] as const,
      "What kind of decision this is. A timeout never applies a default to scope-product or " +
        "security-permission questions.",
    ),
  ),
});

export const AskParameters = Type.Object({
  questions: Type.Array(QuestionSchema, { minItems: 1, maxItems: 8, description: "1 to 8 questions." }),
});

export type AskParams = Static<typeof AskParameters>;

// ---------------------------------------------------------------------------------------------
// Options

export type Route = { channel?: string; user?: string; policy?: string };

export interface SlackAskOptions {
  redisUrl: string;
  prefix: string;
  /** Where to ask; undefined: the bot's default route. */
  route: Route | undefined;
  /** The ask's deadline, sent as `timeout_ms`. */
  timeoutMs: number;
  onTimeout: "cancel" | "recommended" | "error" | undefined;
  /** How long after the ask's deadline the tool stops waiting for the bot's result. */
  marginMs: number;
  /** How long a tool call tries to reach Redis before it answers with an error. */
  connectWindowMs: number;
  /** After an abort, how long to wait for the bot's own cancelled result before answering here. */
  abortGraceMs: number;
  requesterName: string;
}

export const DEFAULTS: SlackAskOptions = {
  redisUrl: "redis://localhost:6379/0",
  prefix: "slack-ask",
  route: undefined,
  timeoutMs: 30 * 60 * 1000,
  onTimeout: undefined,
  marginMs: 2 * 60 * 1000,
  connectWindowMs: 3000,
  abortGraceMs: 500,
  requesterName: "pi",
};

function positiveInt(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined || value.trim() === "") return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0) {
    throw new Error(`slack-ask: ${name} must be a whole number of milliseconds, not ${JSON.stringify(value)}`);
  }
  return parsed;
}

/** The options from the environment (see the top of this file). */
export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): SlackAskOptions {
  const route: Route = {};
  if (env.SLACK_ASK_CHANNEL) route.channel = env.SLACK_ASK_CHANNEL;
  if (env.SLACK_ASK_USER) route.user = env.SLACK_ASK_USER;
  if (env.SLACK_ASK_POLICY) route.policy = env.SLACK_ASK_POLICY;
  const onTimeout = env.SLACK_ASK_ON_TIMEOUT || undefined;
  if (onTimeout !== undefined && !["cancel", "recommended", "error"].includes(onTimeout)) {
    throw new Error(`slack-ask: SLACK_ASK_ON_TIMEOUT must be cancel, recommended or error, not ${onTimeout}`);
  }
  return {
    redisUrl: env.REDIS_URL || DEFAULTS.redisUrl,
    prefix: env.SLACK_ASK_PREFIX || DEFAULTS.prefix,
    route: Object.keys(route).length > 0 ? route : undefined,
    timeoutMs: positiveInt(env.SLACK_ASK_TIMEOUT_MS, "SLACK_ASK_TIMEOUT_MS", DEFAULTS.timeoutMs),
    onTimeout: onTimeout as SlackAskOptions["onTimeout"],
    marginMs: positiveInt(env.SLACK_ASK_CLIENT_MARGIN_MS, "SLACK_ASK_CLIENT_MARGIN_MS", DEFAULTS.marginMs),
    connectWindowMs: DEFAULTS.connectWindowMs,
    abortGraceMs: DEFAULTS.abortGraceMs,
    requesterName: env.SLACK_ASK_REQUESTER || DEFAULTS.requesterName,
  };
}

// ---------------------------------------------------------------------------------------------
// Results

/** One element of the reply list (protocol section 3); only the fields used here. */
export interface ResultEnvelope {
  ask_id: string | null;
  outcome: "answered" | "cancelled" | "timeout" | "dismissed" | "unavailable" | "error";
  text: string;
  details: Record<string, unknown>;
  error: { code: string; message: string } | null;
}

export interface AskToolResult {
  content: { type: "text"; text: string }[];
  details: Record<string, unknown>;
}

/** The bot's result as the model sees it: its text and details unchanged, plus the reason of an
 * `unavailable` (the narration only says that no human could be reached). */
export function fromBot(result: ResultEnvelope): AskToolResult {
  let text = result.text;
  if (result.outcome === "unavailable" && result.error?.message) {
    text += `\n\nReason: ${result.error.message}`;
  }
  return { content: [{ type: "text", text }], details: result.details ?? {} };
}

/** The contract's text for an ask that ended here without the bot: every question `status`. */
function ended(params: AskParams, status: "cancelled" | "timeout", reason: string): AskToolResult {
  // The bot's normalization: the trimmed id, or q<n> for an empty one.
  const answers = params.questions.map((q, i) => ({
    id: q.id.trim() || `q${i + 1}`,
    status,
    selected: [] as number[],
  }));
  const lines = ["User answers:", ...answers.map((a) => `${a.id.replace(/\s+/g, " ")}: (${status})`)];
  return {
    content: [{ type: "text", text: lines.join("\n") }],
    details: { answers, delivery: { surface: "host", degraded: false }, endedBy: "client", reason },
  };
}

function failed(message: string): AskToolResult {
  return { content: [{ type: "text", text: `Error: ${message}` }], details: {} };
}

// ---------------------------------------------------------------------------------------------
// Redis

/** The URL without its password, for messages. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "the configured REDIS_URL";
  }
}

function reasonOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return reasonOf(error.errors[0]);
  if (error instanceof Error) return (error as NodeJS.ErrnoException).code ?? error.message;
  return String(error);
}

/** Resolves after `ms`, or at once when `signal` aborts; never rejects. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/** `promise`, or `undefined` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

class Connection {
  readonly client: Redis;
  /** Why the last connection attempt failed. */
  lastError: unknown;
  private eventError: unknown;
  private reconnect = false;

  constructor(url: string, extra: RedisOptions = {}) {
    this.client = new Redis(url, {
      lazyConnect: true,
      connectTimeout: 2000,
      // While connecting for a tool call: fail at once (the caller retries within its window).
      // Once connected: reconnect after a drop, so a Redis restart costs only a reconnect.
      retryStrategy: (times) => (this.reconnect ? Math.min(times * 200, 2000) : null),
      ...extra,
    });
    // Without a listener ioredis prints "[ioredis] Unhandled error event" for each failure.
    this.client.on("error", (error: unknown) => {
      this.eventError = error;
    });
  }

  /** Connect, retrying until `windowMs` has passed; false when Redis could not be reached. */
  async open(windowMs: number, signal: AbortSignal): Promise<boolean> {
    const until = Date.now() + windowMs;
    for (;;) {
      this.eventError = undefined;
      try {
        await this.client.connect();
        this.reconnect = true;
        return true;
      } catch (error) {
        // connect() rejects with "Connection is closed."; the cause came as an error event.
        this.lastError = this.eventError ?? error;
      }
      if (signal.aborted || Date.now() + 250 >= until) return false;
      await pause(250, signal);
    }
  }

  close(): void {
    this.reconnect = false;
    // On a connection that already ended, ioredis's disconnect() arms a 2 s timer that nothing
    // clears (it waits for a "close" event that already happened), which delays the exit.
    if (this.client.status !== "end") this.client.disconnect(false);
  }
}

// ---------------------------------------------------------------------------------------------
// The tool

type Ending =
  | { kind: "result"; result: ResultEnvelope }
  | { kind: "aborted" }
  | { kind: "shutdown" }
  | { kind: "deadline" };

export const TOOL_DESCRIPTION =
  "Ask a human 1-8 structured multiple-choice questions in Slack and wait for the answers. " +
  "Use it for decisions you should not make alone. The result starts with 'User answers:' and " +
  "has one '<id>: <answer>' line per question; '(timeout)', '(cancelled)' or an unavailable " +
  "warning mean that nobody answered: do not assume an answer then.";

/** The extension with explicit options; the default export reads them from the environment. */
export function slackAsk(overrides: Partial<SlackAskOptions> = {}) {
  const options: SlackAskOptions = { ...DEFAULTS, ...overrides };

  return function register(pi: ExtensionAPI): void {
    // Calls in progress, so that session_shutdown can end them (and close their connections).
    const running = new Map<AbortController, Promise<void>>();
    let shuttingDown = false;

    pi.on("session_shutdown", async () => {
      shuttingDown = true;
      for (const stop of running.keys()) stop.abort("shutdown");
      // Each call sends its cancel (bounded) and closes its connections before it returns.
      await within(Promise.all(running.values()), 3000);
    });

    pi.registerTool({
      name: "ask",
      label: "Ask in Slack",
      description: TOOL_DESCRIPTION,
      promptSnippet: "Ask a human structured questions in Slack and wait for the answers",
      promptGuidelines: [
        "Use ask when a decision needs a human; give every question a short id, 1-12 options and, " +
          "when you have one, the recommended option's index.",
      ],
      parameters: AskParameters,
      executionMode: "sequential",

      async execute(_toolCallId, params, signal, onUpdate, ctx) {
        if (signal?.aborted || shuttingDown) return ended(params, "cancelled", "aborted before asking");

        const stop = new AbortController();
        const onAbort = () => stop.abort("aborted");
        signal?.addEventListener("abort", onAbort, { once: true });
        let finished!: () => void;
        running.set(stop, new Promise<void>((resolve) => (finished = resolve)));

        const askId = `pi~${randomUUID()}`;
        const replyTo = `${options.prefix}:reply:${askId}`;
        const stream = `${options.prefix}:asks`;
        const commands = new Connection(options.redisUrl, { maxRetriesPerRequest: 1 });
        let waiter: Connection | undefined;
        const listening = new AbortController();
        let deadlineTimer: NodeJS.Timeout | undefined;

        const cancel = async (reason: string) => {
          const envelope = { v: 1, ask_id: askId, reply_to: replyTo, reason };
          await within(
            commands.client.xadd(stream, "*", "cancel", JSON.stringify(envelope)).catch(() => undefined),
            1000,
          );
        };

        try {
          if (!(await commands.open(options.connectWindowMs, stop.signal))) {
            if (stop.signal.aborted) return ended(params, "cancelled", "aborted before asking");
            return failed(
              `Redis at ${redactedUrl(options.redisUrl)} is unreachable ` +
                `(${reasonOf(commands.lastError)}); the question was not asked.`,
            );
          }

          const envelope: Record<string, unknown> = {
            v: 1,
            ask_id: askId,
            reply_to: replyTo,
            request: { questions: params.questions },
            timeout_ms: options.timeoutMs,
            // No working directory or host name: only what the person in Slack needs to know.
            requester: { name: options.requesterName, session: sessionId(ctx) },
          };
          if (options.route) envelope.route = options.route;
          if (options.onTimeout) envelope.on_timeout = options.onTimeout;
          const started = Date.now();
          try {
            // ask_id is the idempotency key: a second XADD of the same envelope changes nothing.
            await commands.client.xadd(stream, "*", "ask", JSON.stringify(envelope));
          } catch (error) {
            return failed(
              `could not send the question to Redis at ${redactedUrl(options.redisUrl)} ` +
                `(${reasonOf(error)}); the question was not asked.`,
            );
          }
          onUpdate?.({
            content: [{ type: "text", text: "Waiting for an answer in Slack..." }],
            details: { askId, replyTo },
          });

          // The bot answers by the ask's deadline (plus its recovery time); past that plus the
          // margin, nobody is reading the ask (no bot, wrong prefix) and the call ends here.
          const deadline = new Promise<Ending>((resolve) => {
            deadlineTimer = setTimeout(
              () => resolve({ kind: "deadline" }),
              Math.max(0, started + options.timeoutMs + options.marginMs - Date.now()),
            );
          });
          const stopped = new Promise<Ending>((resolve) => {
            const onStop = () =>
              resolve({ kind: stop.signal.reason === "shutdown" ? "shutdown" : "aborted" });
            if (stop.signal.aborted) onStop();
            else stop.signal.addEventListener("abort", onStop, { once: true });
          });
          // BLPOP blocks its connection, so it gets one of its own; null retries: a command in
          // flight when Redis drops is sent again after the reconnect.
          waiter = new Connection(options.redisUrl, { maxRetriesPerRequest: null });
          // The waiter has a signal of its own: after an abort or the deadline it goes on listening
          // through the grace period. Closing it at once could let its BLPOP, still blocked in
          // Redis, take the result the cancel brings, and that result would be lost.
          const fromQueue = waitForResult(waiter, replyTo, listening.signal);
          const ending = await Promise.race([fromQueue, stopped, deadline]);

          if (ending.kind === "result") return fromBot(ending.result);
          const [reason, status, graceMs] =
            ending.kind === "aborted"
              ? (["the Pi agent run was interrupted", "cancelled", options.abortGraceMs] as const)
              : ending.kind === "shutdown"
                ? (["the Pi session ended", "cancelled", options.abortGraceMs] as const)
                : (["no result arrived by the deadline", "timeout", 1000] as const);
          await cancel(reason);
          // A running bot ends the ask within milliseconds of the cancel: its own result (exact
          // text and details) is returned when it comes within the grace period.
          const late = await within(fromQueue, graceMs);
          if (late?.kind === "result") return fromBot(late.result);
          return ended(params, status, reason);
        } finally {
          clearTimeout(deadlineTimer);
          signal?.removeEventListener("abort", onAbort);
          if (!stop.signal.aborted) stop.abort("done");
          listening.abort(); // ends waitForResult's loop
          waiter?.close(); // and a BLPOP in flight
          if (commands.client.status === "ready") {
            await within(commands.client.quit().catch(() => undefined), 1000);
          }
          commands.close();
          running.delete(stop);
          finished();
        }
      },
    });
  };
}

function sessionId(ctx: { sessionManager?: { getSessionId?: () => string } } | undefined): string | undefined {
  try {
    return ctx?.sessionManager?.getSessionId?.();
  } catch {
    return undefined;
  }
}

/** BLPOP in short slices until the result comes or `signal` aborts (then it never resolves). */
async function waitForResult(waiter: Connection, replyTo: string, signal: AbortSignal): Promise<Ending> {
  while (!signal.aborted) {
    // Once connected, ioredis reconnects by itself; a connection that could not be opened (Redis
    // went away right after the XADD) is opened again here until the call ends.
    if (waiter.client.status === "wait" || waiter.client.status === "end") {
      if (!(await waiter.open(1000, signal))) {
        await pause(500, signal);
        continue;
      }
    }
    let popped: [string, string] | null;
    try {
      popped = await waiter.client.blpop(replyTo, 5);
    } catch {
      await pause(500, signal);
      continue;
    }
    if (popped) {
      try {
        return { kind: "result", result: JSON.parse(popped[1]) as ResultEnvelope };
      } catch {
        continue; // not a result envelope: not ours to interpret
      }
    }
  }
  return new Promise<Ending>(() => {});
}

export default function slackAskFromEnv(pi: ExtensionAPI): void {
  slackAsk(optionsFromEnv())(pi);
}
