/**
 * A real Pi session (`pi -p`, Pi from this package's devDependencies) with the extension loaded
 * from src/index.ts, a scripted model on loopback, the real bot and the fake Slack: the model asks,
 * a person clicks in Slack, the model gets the bot's narration, and Pi exits by itself.
 */

import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";

import { startFakeModel } from "./fake-model.js";
import { Demo, ONE_CLICK, PACKAGE_DIR, REDIS_URL, deleteKeys, eventually, uniquePrefix } from "./helpers.js";

const PI = resolve(PACKAGE_DIR, "node_modules/@earendil-works/pi-coding-agent/dist/cli.js");

test("pi -p: the model asks, a click in Slack answers, the model reads the narration, pi exits", { timeout: 180_000 }, async (t) => {
  const prefix = uniquePrefix();
  const demo = await Demo.start(prefix);
  t.after(async () => {
    await demo.stop();
    await deleteKeys(prefix);
  });
  const model = await startFakeModel(ONE_CLICK);
  t.after(() => model.close());

  // Pi's own directory (settings, models.json) and HOME: fresh and empty but for the scripted model.
  const home = mkdtempSync(join(tmpdir(), "slack-ask-pi-home-"));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  const agent = mkdtempSync(join(home, "agent-"));
  const cwd = mkdtempSync(join(home, "work-"));
  writeFileSync(
    join(agent, "models.json"),
    JSON.stringify({
      providers: {
        scripted: {
          baseUrl: model.baseUrl,
          api: "openai-completions",
          apiKey: "not-a-real-key",
          compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
          models: [{ id: "scripted-model", reasoning: false }],
        },
      },
    }),
  );

  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("SLACK_") && !key.startsWith("PI_") && key !== "REDIS_URL") env[key] = value;
  }
  Object.assign(env, {
    HOME: home,
    PI_CODING_AGENT_DIR: agent,
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    REDIS_URL,
    SLACK_ASK_PREFIX: prefix,
  });
  const args = [
    PI,
    "-p",
    "--provider",
    "scripted",
    "--model",
    "scripted-model",
    "--no-session",
    "--no-extensions",
    "--no-skills",
    "--no-prompt-templates",
    "--no-context-files",
    "--no-builtin-tools",
    "-e",
    resolve(PACKAGE_DIR, "src/index.ts"),
    "Ask the team whether to ship, then tell me what they said.",
  ];
  const pi = spawn(process.execPath, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  pi.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  pi.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((r) => pi.on("close", (c, s) => r([c, s])));
  t.after(() => {
    if (pi.exitCode === null && pi.signalCode === null) pi.kill("SIGKILL");
  });

  const message = await eventually(
    async () => {
      if (pi.exitCode !== null) throw new Error(`pi exited early (${pi.exitCode}):\n${stdout}\n${stderr}`);
      return (await demo.messages())[0];
    },
    "the question in Slack",
    // Pi's start takes seconds (tens of seconds on a loaded machine).
    90_000,
  );
  await demo.click(message, "slack_ask:choose:0");
  const answered = Date.now();

  // Pi must exit by itself once the model has answered: nothing is left open.
  const killer = setTimeout(() => pi.kill("SIGKILL"), 20_000);
  const [code, signal] = await exited;
  clearTimeout(killer);
  assert.equal(signal, null, `pi did not exit by itself within 20 s of the answer:\n${stdout}\n${stderr}`);
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  assert.ok(Date.now() - answered < 20_000);

  // The model received exactly the bot's narration as the tool result, and printed it.
  const toolMessages = model.requests.flatMap((r) => r.messages).filter((m: any) => m.role === "tool");
  assert.equal(toolMessages.length, 1);
  const content = toolMessages[0].content;
  const text = typeof content === "string" ? content : content.map((p: any) => p.text).join("");
  assert.equal(text, "User answers:\nship: Yes");
  assert.equal(stdout, "The human answered. User answers:\nship: Yes\n");
  assert.doesNotMatch(stderr, /Unhandled error event|Tool ask not found/);

  // The tool the model saw: the question contract's fields, typed.
  const tool = model.requests[0].tools.find((x: any) => x.function.name === "ask");
  const question = tool.function.parameters.properties.questions.items;
  assert.deepEqual(Object.keys(question.properties).sort(), [
    "allowCustom",
    "category",
    "description",
    "id",
    "multi",
    "options",
    "question",
    "recommended",
  ]);
  assert.deepEqual(question.properties.category.enum, ["implementation", "scope-product", "security-permission"]);
});
