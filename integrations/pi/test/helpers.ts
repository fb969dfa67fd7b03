/**
 * Test helpers: the real bot behind the fake Slack (`slack-ask demo`), the playground page's HTTP
 * calls, a stand-in for Pi's ExtensionAPI, and Redis clean-up by key prefix (never a flush).
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Redis } from "ioredis";

import type { AskParams, AskToolResult } from "../src/index.js";

/** The package root (this file runs from build/test/). */
export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const REPO_ROOT = resolve(PACKAGE_DIR, "../..");
export const REDIS_URL = process.env.SLACK_ASK_TEST_REDIS_URL ?? "redis://127.0.0.1:6379/0";

export function uniquePrefix(): string {
  return `slack-ask-pi-test-${randomUUID().slice(0, 8)}`;
}

/** The `slack-ask` command: SLACK_ASK_BIN, the repository's venv, else `python3 -m bot.cli`. */
export function slackAskCommand(): string[] {
  if (process.env.SLACK_ASK_BIN) return [process.env.SLACK_ASK_BIN];
  const venv = resolve(REPO_ROOT, ".venv/bin/slack-ask");
  if (existsSync(venv)) return [venv];
  return ["python3", "-m", "bot.cli"];
}

/** Poll `probe` until it returns something truthy; fail naming `what` after `timeoutMs`. */
export async function eventually<T>(
  probe: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found) return found;
    if (Date.now() >= until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A TCP port on loopback that nothing listens on (taken, then released). */
export async function closedPort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

export async function deleteKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

/** The entries of `P:asks` (each one field: ask or cancel), parsed. */
export async function streamEntries(prefix: string): Promise<{ field: string; value: Record<string, unknown> }[]> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const entries = await redis.xrange(`${prefix}:asks`, "-", "+");
    return entries.map(([, fields]) => ({ field: fields[0] ?? "", value: JSON.parse(fields[1] ?? "null") }));
  } finally {
    redis.disconnect();
  }
}

export async function listItems(key: string): Promise<Record<string, unknown>[]> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    return (await redis.lrange(key, 0, -1)).map((raw) => JSON.parse(raw));
  } finally {
    redis.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// The bot: `slack-ask demo` (the real bot, the fake Slack and its page) against REDIS_URL.

export interface Message {
  ts: string;
  thread_ts: string | null;
  text?: string;
  blocks: { block_id?: string; elements?: { action_id?: string; value?: string }[] }[];
}

export class Demo {
  output = "";
  private constructor(
    readonly process: ChildProcess,
    readonly prefix: string,
    public url = "",
  ) {}

  /** Start the demo with its default channel C0DEPLOY; resolves once its page answers. */
  static async start(prefix: string): Promise<Demo> {
    const [command, ...args] = slackAskCommand();
    const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL };
    for (const key of Object.keys(env)) if (key.startsWith("SLACK_")) delete env[key];
    const child = spawn(command!, [...args, "demo", "--port", "0", "--prefix", prefix, "--no-sample"], {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const demo = new Demo(child, prefix);
    child.stdout!.on("data", (chunk: Buffer) => (demo.output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (demo.output += chunk.toString()));
    const line = await eventually(
      () => {
        if (child.exitCode !== null) throw new Error(`slack-ask demo exited early:\n${demo.output}`);
        return /^Playground: (\S+)/m.exec(demo.output);
      },
      "the demo's Playground line",
      45_000,
    ).catch((error: Error) => {
      child.kill("SIGKILL");
      throw new Error(`${error.message}; its output:\n${demo.output}`);
    });
    demo.url = line[1]!;
    return demo;
  }

  async get(path: string): Promise<any> {
    const response = await fetch(this.url + path);
    if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
    return response.json();
  }

  async post(path: string, body: unknown): Promise<any> {
    const response = await fetch(this.url + path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const data = await response.json();
    if (response.status !== 200) throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(data)}`);
    return data;
  }

  /** The top-level messages of `channel`. */
  async messages(channel = "C0DEPLOY"): Promise<Message[]> {
    const state = await this.get("ui/state");
    const all: Message[] = state.messages[channel] ?? [];
    return all.filter((m) => m.thread_ts === null || m.thread_ts === m.ts);
  }

  async posted(channel = "C0DEPLOY"): Promise<Message> {
    return eventually(async () => (await this.messages(channel))[0], `a message in ${channel}`);
  }

  /** Click the element `actionId` of `message` as `user`. */
  async click(message: Message, actionId: string, user = "U0CAROL", channel = "C0DEPLOY"): Promise<void> {
    for (const block of message.blocks) {
      for (const element of block.elements ?? []) {
        if (element.action_id === actionId) {
          await this.post("ui/click", {
            user,
            channel,
            ts: message.ts,
            action_id: actionId,
            block_id: block.block_id,
            value: element.value,
          });
          return;
        }
      }
    }
    throw new Error(`no ${actionId} in ${JSON.stringify(message.blocks)}`);
  }

  /** `slack-ask status ASK_ID --json`: the stored record and result. */
  async status(askId: string): Promise<any> {
    const [command, ...args] = slackAskCommand();
    const env = { ...process.env, REDIS_URL, SLACK_ASK_PREFIX: this.prefix };
    const child = spawn(command!, [...args, "status", askId, "--json"], { cwd: REPO_ROOT, env });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((r) => child.on("close", r));
    if (code !== 0) throw new Error(`slack-ask status exited ${code}: ${err}`);
    return JSON.parse(out);
  }

  /** `promise`, or a failure naming `what` and showing the demo's output after `ms`. */
  async within<T>(promise: Promise<T>, what: string, ms = 15_000): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no ${what} after ${ms} ms; the demo's output:\n${this.output}`)), ms);
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async stop(): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    const exited = new Promise((r) => this.process.once("exit", r));
    this.process.kill("SIGINT");
    const timer = setTimeout(() => this.process.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Pi's side: the parts of ExtensionAPI the extension uses.

type Handler = (event: unknown, ctx: unknown) => unknown;

export interface RegisteredTool {
  name: string;
  parameters: unknown;
  execute(
    toolCallId: string,
    params: AskParams,
    signal: AbortSignal | undefined,
    onUpdate: ((partial: { details: Record<string, unknown> }) => void) | undefined,
    ctx: unknown,
  ): Promise<AskToolResult>;
}

export class FakePi {
  tools = new Map<string, RegisteredTool>();
  handlers = new Map<string, Handler[]>();
  updates: Record<string, unknown>[] = [];

  registerTool(tool: RegisteredTool): void {
    this.tools.set(tool.name, tool);
  }

  on(event: string, handler: Handler): void {
    this.handlers.set(event, [...(this.handlers.get(event) ?? []), handler]);
  }

  /** Call the `ask` tool; `askId` resolves as soon as the ask is on the stream. */
  ask(params: AskParams, signal?: AbortSignal): { result: Promise<AskToolResult>; askId: Promise<string> } {
    const tool = this.tools.get("ask");
    if (!tool) throw new Error("the extension registered no ask tool");
    let sent!: (askId: string) => void;
    const askId = new Promise<string>((r) => (sent = r));
    const ctx = { sessionManager: { getSessionId: () => "test-session" }, cwd: "/home/someone/secret-project" };
    const result = tool.execute(
      "call-1",
      params,
      signal,
      (partial) => {
        this.updates.push(partial.details);
        sent(String(partial.details.askId));
      },
      ctx,
    );
    return { result, askId };
  }

  async emit(event: string, payload: unknown = {}): Promise<void> {
    for (const handler of this.handlers.get(event) ?? []) await handler(payload, {});
  }
}

export const ONE_CLICK: AskParams = {
  questions: [{ id: "ship", question: "Ship it?", options: [{ label: "Yes" }, { label: "No" }], recommended: 0 }],
};

// ---------------------------------------------------------------------------------------------
// A process that loads the extension, calls the tool once and must then exit by itself.

export interface FixtureRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** From the result line on stdout to the process's exit. */
  exitAfterResultMs: number | undefined;
  output: { result: AskToolResult; askId?: string; elapsedMs: number } | undefined;
}

export async function runFixture(input: unknown, limitMs = 20_000): Promise<FixtureRun> {
  const script = resolve(PACKAGE_DIR, "build/test/fixtures/call-ask.js");
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, SLACK_ASK_FIXTURE: JSON.stringify(input) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let resultAt: number | undefined;
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
    if (resultAt === undefined && stdout.includes("\n")) resultAt = Date.now();
  });
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  // The limit only stops a process that did not exit by itself; the test then fails on `signal`.
  const killer = setTimeout(() => child.kill("SIGKILL"), limitMs);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
    child.on("close", (c, s) => r([c, s])),
  );
  clearTimeout(killer);
  const line = stdout.trim().split("\n").filter(Boolean).at(-1);
  const exitAfterResultMs = resultAt === undefined ? undefined : Date.now() - resultAt;
  return { code, signal, stdout, stderr, exitAfterResultMs, output: line ? JSON.parse(line) : undefined };
}
