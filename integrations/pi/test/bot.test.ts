/**
 * The extension against the real bot, real Redis and the fake Slack (`slack-ask demo`), one key
 * prefix and one demo process per test.
 */

import { strict as assert } from "node:assert";
import { describe, test, type TestContext } from "node:test";

import { type AskParams, type SlackAskOptions, slackAsk } from "../src/index.js";
import {
  Demo,
  FakePi,
  ONE_CLICK,
  REDIS_URL,
  deleteKeys,
  eventually,
  listItems,
  uniquePrefix,
} from "./helpers.js";

async function setUp(t: TestContext, options: Partial<SlackAskOptions> = {}) {
  const prefix = uniquePrefix();
  const demo = await Demo.start(prefix);
  // The demo first: a bot still running would write its keys again.
  t.after(async () => {
    await demo.stop();
    await deleteKeys(prefix);
  });
  const pi = new FakePi();
  slackAsk({ redisUrl: REDIS_URL, prefix, ...options })(pi as never);
  return { prefix, demo, pi };
}

// Each test has its own demo and prefix, so they run side by side.
describe("with the bot", { concurrency: 2 }, () => {
  test("an answer clicked in Slack comes back as the bot's text and details, unchanged", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t);
    const call = pi.ask(ONE_CLICK);
    const askId = await call.askId;
    // No route configured: the bot's default route (the demo's default channel, C0DEPLOY).
    const message = await demo.posted("C0DEPLOY");
    await demo.click(message, "slack_ask:choose:1");
    const result = await demo.within(call.result, "tool result");

    assert.deepEqual(result.content, [{ type: "text", text: "User answers:\nship: No" }]);
    const stored = await demo.status(askId);
    assert.equal(stored.result.outcome, "answered");
    assert.equal(result.content[0]!.text, stored.result.text);
    assert.deepEqual(result.details, stored.result.details);
    assert.deepEqual((result.details as { selectedOptions: string[] }).selectedOptions, ["No"]);

    // No route in the envelope: the bot used its default route. The message names the requester
    // and Pi's session, and nothing of the working directory.
    assert.equal(stored.route, "#C0DEPLOY");
    const shown = JSON.stringify(message);
    assert.match(shown, /From \*pi\* · session `test-session`/);
    assert.ok(!shown.includes("secret-project") && !shown.includes(process.cwd()), shown);
  });

  test("a multi-question ask with custom text and a note is narrated by the bot", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t);
    const params: AskParams = {
      questions: [
        { id: "db", question: "Database?", options: [{ label: "Postgres" }, { label: "MySQL" }], allowCustom: false },
        {
          id: "features",
          question: "Which features?",
          options: [{ label: "Logging" }, { label: "Tracing", description: "OpenTelemetry" }],
          multi: true,
        },
      ],
    };
    const call = pi.ask(params);
    const askId = await call.askId;
    const message = await demo.posted();
    await demo.click(message, "slack_ask:open", "U0BOB");
    const view = await eventually(async () => {
      const state = await demo.get("ui/state");
      const stack: string[] = state.view_stacks.U0BOB ?? [];
      return state.views.find((v: { id: string }) => stack.length > 0 && v.id === stack[stack.length - 1]);
    }, "the form's modal");
    await demo.post("ui/submit", {
      user: "U0BOB",
      view_id: view.id,
      values: {
        "answer:0": { answer: "0" },
        "answer:1": { answer: ["0", "1"] },
        "custom:1": { custom: "Profiling" },
      },
    });
    const result = await demo.within(call.result, "tool result");
    assert.equal(result.content[0]!.text, 'User answers:\ndb: Postgres\nfeatures: [Logging, Tracing] + Other: "Profiling"');
    const stored = await demo.status(askId);
    assert.equal(result.content[0]!.text, stored.result.text);
    assert.deepEqual(result.details, stored.result.details);
  });

  test("the ask's deadline: the bot's timeout result", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t, { timeoutMs: 1500, marginMs: 30_000 });
    const started = Date.now();
    const call = pi.ask(ONE_CLICK);
    const askId = await call.askId;
    await demo.posted();
    const result = await demo.within(call.result, "tool result");
    const elapsed = Date.now() - started;
    assert.equal(result.content[0]!.text, "User answers:\nship: (timeout)");
    const stored = await demo.status(askId);
    assert.equal(stored.result.outcome, "timeout");
    assert.deepEqual(result.details, stored.result.details);
    assert.ok(elapsed < 15_000, `the bot's timeout came after ${elapsed} ms`);
  });

  test("on_timeout recommended: the bot's default, narrated by the bot", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t, { timeoutMs: 1500, marginMs: 30_000, onTimeout: "recommended" });
    const result = await demo.within(pi.ask(ONE_CLICK).result, "tool result");
    assert.equal(result.content[0]!.text, "User answers:\nship: (timeout; default applied, no human answered: Yes)");
  });

  test("an abort withdraws the ask in Slack and returns the bot's (cancelled) result", { timeout: 90_000 }, async (t) => {
    // A grace period long enough for a loaded machine: this test is about the bot's own result.
    // The bound on an abort's latency is in client.test.ts (no bot, grace 300 ms). 3 s once fell
    // short in CI, with four suites' bots starting at once on two cores.
    const { demo, pi } = await setUp(t, { abortGraceMs: 6000 });
    const controller = new AbortController();
    const call = pi.ask(ONE_CLICK, controller.signal);
    const askId = await call.askId;
    await demo.posted();
    const aborted = Date.now();
    controller.abort();
    const result = await demo.within(call.result, "tool result");
    const elapsed = Date.now() - aborted;
    assert.equal(result.content[0]!.text, "User answers:\nship: (cancelled)");
    assert.ok(elapsed < 6500, `the abort took ${elapsed} ms`);

    // The cancel reached the bot: it ended the ask with the cancel's reason, and the tool returned
    // the bot's own result (which left the reply list empty).
    const stored = await demo.status(askId);
    assert.equal(stored.result.outcome, "cancelled");
    assert.equal(stored.audit.at(-1).detail, "the Pi agent run was interrupted");
    assert.deepEqual(result.details, stored.result.details);
    assert.deepEqual(await listItems(`${demo.prefix}:reply:${askId}`), []);
    await eventually(async () => {
      const [message] = await demo.messages();
      return message && !JSON.stringify(message.blocks).includes("slack_ask:choose");
    }, "the Slack message without its buttons");
  });

  test("an unavailable route: the bot's warning plus the reason", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t, { route: { channel: "C0NOPE" } });
    const result = await demo.within(pi.ask(ONE_CLICK).result, "tool result");
    const text = result.content[0]!.text;
    assert.match(text, /^User answers:\nship: \(unavailable\)\n\nNo human answer surface is available/);
    assert.match(text, /\n\nReason: Slack answered channel_not_found when posting to C0NOPE$/);
  });

  test("an invalid request: the bot's invalid_request message", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t);
    const params: AskParams = {
      questions: [
        { id: "a", question: "One?", options: [{ label: "x" }] },
        { id: "a", question: "Two?", options: [{ label: "y" }] },
      ],
    };
    const result = await demo.within(pi.ask(params).result, "tool result");
    assert.deepEqual(result, { content: [{ type: "text", text: 'Error: duplicate question id "a"' }], details: {} });
  });

  test("session_shutdown during an ask withdraws it and returns", { timeout: 90_000 }, async (t) => {
    const { demo, pi } = await setUp(t);
    const call = pi.ask(ONE_CLICK);
    const askId = await call.askId;
    await demo.posted();
    await pi.emit("session_shutdown", { type: "session_shutdown", reason: "quit" });
    const result = await demo.within(call.result, "tool result");
    assert.equal(result.content[0]!.text, "User answers:\nship: (cancelled)");
    // The cancel reaches the bot even when the tool answered before the bot did.
    const stored = await eventually(async () => {
      const status = await demo.status(askId);
      return status.result?.outcome === "cancelled" ? status : null;
    }, "the bot's cancelled result", 20_000);
    assert.equal(stored.audit.at(-1).detail, "the Pi session ended");
  });
});
