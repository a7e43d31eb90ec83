// The AI SDK helper inside the real `ai` package (pinned in
// devDependencies): generateText with a scripted model that calls
// run_python, so the SDK validates the input against our schema, runs the
// tool against a real server and hands the model our toModelOutput.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { generateText, jsonSchema, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";

import { PyExec } from "../dist/index.js";
import { runPythonTool } from "../dist/tools/ai.js";
import { skipInstallError, startServer } from "./server.mjs";

let srv;
let px;

before(async () => {
  srv = await startServer();
  px = new PyExec(srv.url, { apiKey: srv.apiKey, timeoutMs: 240_000 });
});

after(async () => {
  await srv?.stop();
});

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** A model that calls run_python with args, then answers "done"; returns what the SDK sent back for the call. */
async function roundTrip(tool, args) {
  const model = new MockLanguageModelV4({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId: "c1", toolName: "run_python", input: JSON.stringify(args) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      },
      { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
    ],
  });
  const r = await generateText({ model, tools: { run_python: tool }, stopWhen: stepCountIs(3), prompt: "compute" });
  assert.equal(r.text, "done");
  const sent = model.doGenerateCalls[0].tools.find((t) => t.name === "run_python");
  assert.equal(sent.inputSchema.properties.code.type, "string");
  const [result] = model.doGenerateCalls[1].prompt.at(-1).content;
  assert.equal(result.type, "tool-result");
  assert.equal(result.toolCallId, "c1");
  return result.output;
}

test("generateText runs run_python and gives the model its text", async () => {
  for (const tool of [await runPythonTool(px, { jsonSchema }), await runPythonTool(px)]) {
    const output = await roundTrip(tool, { code: "print(6 * 7)" });
    assert.equal(output.type, "content");
    assert.match(output.value[0].text, /^status: completed, exit code 0.*\n--- stdout ---\n42\n$/s);
  }
  const failed = await roundTrip(await runPythonTool(px, { jsonSchema }), { code: "1/0" });
  assert.equal(failed.type, "error-text");
  assert.match(failed.value, /ZeroDivisionError/);
});

test("generateText gives the model the plot as an image", async (t) => {
  if (!srv.hasTools) return t.skip(srv.noTools);
  const warm = await px.eval("import matplotlib", { requirements: "matplotlib\n", timeout_seconds: 120 });
  if (skipInstallError(t, warm)) return;
  const output = await roundTrip(await runPythonTool(px, { jsonSchema }), {
    code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])",
    requirements: ["matplotlib"],
  });
  assert.equal(output.type, "content");
  // The SDK hands providers our image-data part as its own file part.
  const image = output.value[1];
  assert.equal(image.type, "file");
  assert.equal(image.mediaType, "image/png");
  assert.ok(image.data.data.startsWith("iVBORw0KGgo"), JSON.stringify(image).slice(0, 200));
});
