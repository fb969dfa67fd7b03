/**
 * The endings that do not come from the bot: no bot reading the ask, Redis down, an abort with
 * no bot; and the process exiting by itself in each case. Real Redis, no bot.
 */

import { strict as assert } from "node:assert";
import { createServer, type Socket } from "node:net";
import { test } from "node:test";

import { slackAsk } from "../src/index.js";
import { FakePi, ONE_CLICK, REDIS_URL, closedPort, deleteKeys, streamEntries, uniquePrefix } from "./helpers.js";
import { runFixture } from "./helpers.js";

test("no bot reads the ask: the client deadline sends a cancel and returns (timeout)", { timeout: 30_000 }, async (t) => {
  const prefix = uniquePrefix();
  t.after(() => deleteKeys(prefix));
  const run = await runFixture({
    options: { redisUrl: REDIS_URL, prefix, timeoutMs: 1000, marginMs: 500, abortGraceMs: 200 },
    params: ONE_CLICK,
  });
  assert.equal(run.signal, null, `the process did not exit by itself: ${run.stderr}`);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stderr, "");
  assert.ok(run.exitAfterResultMs! < 1500, `the process ran ${run.exitAfterResultMs} ms past the result`);
  const { result, askId, elapsedMs } = run.output!;
  assert.equal(result.content[0]!.text, "User answers:\nship: (timeout)");
  assert.deepEqual(result.details.answers, [{ id: "ship", status: "timeout", selected: [] }]);
  // Deadline 1000 ms + margin 500 ms, then at most the 1 s wait for a late result.
  assert.ok(elapsedMs >= 1500 && elapsedMs < 4000, `ended after ${elapsedMs} ms`);

  // On the stream, untouched since no bot runs: the ask as sent, then its cancel.
  const entries = await streamEntries(prefix);
  assert.deepEqual(
    entries.map((e) => e.field),
    ["ask", "cancel"],
  );
  const replyTo = `${prefix}:reply:${askId}`;
  assert.deepEqual(entries[0]!.value, {
    v: 1,
    ask_id: askId,
    reply_to: replyTo,
    request: { questions: ONE_CLICK.questions },
    timeout_ms: 1000,
    requester: { name: "pi", session: "test-session" },
  });
  assert.deepEqual(entries[1]!.value, {
    v: 1,
    ask_id: askId,
    reply_to: replyTo,
    reason: "no result arrived by the deadline",
  });
});

test("Redis down: one clear error within seconds, nothing printed, and the process exits", { timeout: 30_000 }, async () => {
  const port = await closedPort();
  const url = `redis://:s3cret@127.0.0.1:${port}/0`;
  const run = await runFixture({ options: { redisUrl: url, prefix: uniquePrefix() }, params: ONE_CLICK });
  assert.equal(run.signal, null, `the process did not exit by itself: ${run.stderr}`);
  assert.equal(run.code, 0, run.stderr);
  // No "[ioredis] Unhandled error event" lines, or anything else.
  assert.equal(run.stderr, "");
  const { result, elapsedMs } = run.output!;
  assert.deepEqual(result, {
    content: [
      {
        type: "text",
        text:
          `Error: Redis at redis://:***@127.0.0.1:${port}/0 is unreachable (ECONNREFUSED); ` +
          "the question was not asked.",
      },
    ],
    details: {},
  });
  assert.ok(elapsedMs < 5000, `the error came after ${elapsedMs} ms`);
  // And the process ends right after the call, not seconds later (no timer or socket left).
  // (ioredis arms a 2 s timer when an ended connection is disconnected again.)
  assert.ok(run.exitAfterResultMs! < 1500, `the process ran ${run.exitAfterResultMs} ms past the result`);
});

test("loading the extension opens no connection; shutdown without a call exits at once", { timeout: 30_000 }, async (t) => {
  // A stand-in Redis that only counts connections.
  const sockets: Socket[] = [];
  const server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const run = await runFixture({ options: { redisUrl: `redis://127.0.0.1:${port}/0`, prefix: uniquePrefix() } });
  assert.equal(run.signal, null);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stderr + run.stdout, "");
  assert.equal(sockets.length, 0);
});

test("an abort with no bot running answers (cancelled) within the grace period and sends a cancel", { timeout: 30_000 }, async (t) => {
  const prefix = uniquePrefix();
  t.after(() => deleteKeys(prefix));
  const pi = new FakePi();
  slackAsk({ redisUrl: REDIS_URL, prefix, abortGraceMs: 300 })(pi as never);
  const controller = new AbortController();
  const call = pi.ask(ONE_CLICK, controller.signal);
  const askId = await call.askId;
  const aborted = Date.now();
  controller.abort();
  const result = await call.result;
  const elapsed = Date.now() - aborted;
  assert.equal(result.content[0]!.text, "User answers:\nship: (cancelled)");
  assert.ok(elapsed < 1000, `the abort took ${elapsed} ms`);
  const entries = await streamEntries(prefix);
  assert.deepEqual(entries[1], {
    field: "cancel",
    value: { v: 1, ask_id: askId, reply_to: `${prefix}:reply:${askId}`, reason: "the Pi agent run was interrupted" },
  });
});

test("an aborted signal before the call: (cancelled) without touching Redis", { timeout: 30_000 }, async () => {
  const pi = new FakePi();
  slackAsk({ redisUrl: `redis://127.0.0.1:${await closedPort()}/0`, prefix: uniquePrefix() })(pi as never);
  const controller = new AbortController();
  controller.abort();
  const result = await pi.ask(ONE_CLICK, controller.signal).result;
  assert.equal(result.content[0]!.text, "User answers:\nship: (cancelled)");
  assert.equal(pi.updates.length, 0);
});
