// The run_python helpers of pyexec-client/openai, /anthropic and /ai
// against a real server: definitions from GET /api/v1/tools, calls shaped
// as each SDK produces them, answers in each SDK's content format with the
// plots as images.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { PyExec, runPython } from "../dist/index.js";
import { runPythonTool } from "../dist/tools/ai.js";
import { anthropicTool, anthropicToolResult } from "../dist/tools/anthropic.js";
import { openaiChatTool, openaiFunctionCallOutput, openaiResponsesTool, openaiToolMessages } from "../dist/tools/openai.js";
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

const PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')";
const PNG = "data:image/png;base64,iVBORw0KGgo";

/** A plot's call needs matplotlib from the package index; skip when it cannot be had. */
async function plotAvailable(t) {
  if (!srv.hasTools) {
    t.skip(srv.noTools);
    return false;
  }
  const r = await px.eval("import matplotlib", { requirements: "matplotlib\n", timeout_seconds: 120 });
  return !skipInstallError(t, r);
}

describe("definitions", () => {
  test("each SDK's shape, from the server", async () => {
    const chat = await openaiChatTool(px);
    assert.equal(chat.type, "function");
    assert.equal(chat.function.name, "run_python");
    assert.deepEqual(chat.function.parameters.required, ["code"]);
    assert.equal(chat.function.strict, undefined);

    const strictChat = await openaiChatTool(px, { strict: true });
    assert.equal(strictChat.function.strict, true);
    assert.deepEqual(strictChat.function.parameters.required, Object.keys(strictChat.function.parameters.properties));

    const responses = await openaiResponsesTool(px);
    assert.equal(responses.name, "run_python");
    assert.equal(responses.strict, false);
    assert.equal((await openaiResponsesTool(px, { strict: true })).strict, true);

    const claude = await anthropicTool(px);
    assert.equal(claude.name, "run_python");
    assert.equal(claude.input_schema.type, "object");

    const ai = await runPythonTool(px);
    assert.match(ai.description, /Python/);
    assert.equal(ai.inputSchema.jsonSchema.properties.code.type, "string");
    assert.equal(ai.inputSchema[Symbol.for("vercel.ai.schema")], true);
    const custom = await runPythonTool(px, { jsonSchema: (s) => ({ wrapped: s }) });
    assert.equal(custom.inputSchema.wrapped.type, "object");
  });
});

describe("OpenAI", () => {
  test("Chat Completions: a tool message, and the plots in a user message", async (t) => {
    const call = { id: "call_1", type: "function", function: { name: "run_python", arguments: JSON.stringify({ code: "print(6 * 7)" }) } };
    const [msg, ...rest] = await openaiToolMessages(px, call);
    assert.deepEqual(rest, []);
    assert.equal(msg.role, "tool");
    assert.equal(msg.tool_call_id, "call_1");
    assert.match(msg.content, /^status: completed, exit code 0/);
    assert.match(msg.content, /--- stdout ---\n42\n/);

    if (!(await plotAvailable(t))) return;
    const plot = { id: "call_2", type: "function", function: { name: "run_python", arguments: JSON.stringify({ code: PLOT, requirements: ["matplotlib"] }) } };
    const [toolMsg, userMsg] = await openaiToolMessages(px, plot);
    assert.match(toolMsg.content, /--- output 1: image\/png, image 1 below ---/);
    assert.equal(userMsg.role, "user");
    assert.equal(userMsg.content[1].type, "image_url");
    assert.ok(userMsg.content[1].image_url.url.startsWith(PNG));
  });

  test("Responses: function_call_output with text and input_image", async (t) => {
    const out = await openaiFunctionCallOutput(px, { type: "function_call", call_id: "fc_1", name: "run_python", arguments: '{"code": "print(1)"}' });
    assert.deepEqual(Object.keys(out).sort(), ["call_id", "output", "type"]);
    assert.equal(out.type, "function_call_output");
    assert.equal(out.call_id, "fc_1");
    assert.match(out.output, /--- stdout ---\n1\n/);

    if (!(await plotAvailable(t))) return;
    const withPlot = await openaiFunctionCallOutput(px, {
      type: "function_call",
      call_id: "fc_2",
      name: "run_python",
      arguments: JSON.stringify({ code: PLOT, requirements: ["matplotlib"] }),
    });
    assert.equal(withPlot.output[0].type, "input_text");
    assert.match(withPlot.output[0].text, /plotted/);
    assert.equal(withPlot.output[1].type, "input_image");
    assert.ok(withPlot.output[1].image_url.startsWith(PNG));
  });

  test("strict-mode arguments: null means not given", async () => {
    const args = { code: "import sys\nprint(sys.stdin.read() or 'empty')", files: null, python_version: null, timeout_seconds: null,
      network: null, secrets: null, stdin: null, requirements: null, session_id: null };
    const out = await openaiFunctionCallOutput(px, { call_id: "fc_3", name: "run_python", arguments: JSON.stringify(args) });
    assert.match(out.output, /^status: completed, exit code 0/);
    assert.match(out.output, /--- stdout ---\nempty\n/);
  });
});

describe("Anthropic", () => {
  test("tool_result: text, images, is_error on an exception", async (t) => {
    const bad = await anthropicToolResult(px, { type: "tool_use", id: "toolu_1", name: "run_python", input: { code: "raise ValueError('bad')" } });
    assert.equal(bad.type, "tool_result");
    assert.equal(bad.tool_use_id, "toolu_1");
    assert.equal(bad.is_error, true);
    assert.match(bad.content[0].text, /error: ValueError \(line 1\)/);
    assert.match(bad.content[0].text, /ValueError: bad/);
    assert.match(bad.content[0].text, /Traceback/);

    const ok = await anthropicToolResult(px, { id: "toolu_2", name: "run_python", input: { code: "print('fine')" } });
    assert.equal(ok.is_error, undefined);

    if (!(await plotAvailable(t))) return;
    const plot = await anthropicToolResult(px, { id: "toolu_3", name: "run_python", input: { code: PLOT, requirements: ["matplotlib"] } });
    assert.equal(plot.content[1].type, "image");
    assert.equal(plot.content[1].source.type, "base64");
    assert.equal(plot.content[1].source.media_type, "image/png");
    assert.ok(plot.content[1].source.data.startsWith("iVBORw0KGgo"));
  });

  test("an unknown tool and bad arguments are error results for the model", async () => {
    const unknown = await anthropicToolResult(px, { id: "toolu_4", name: "rm_rf", input: {} });
    assert.equal(unknown.is_error, true);
    assert.match(unknown.content[0].text, /unknown tool "rm_rf"/);
    const noCode = await anthropicToolResult(px, { id: "toolu_5", name: "run_python", input: { files: [] } });
    assert.match(noCode.content[0].text, /code is required/);
    const refused = await anthropicToolResult(px, { id: "toolu_6", name: "run_python", input: { code: "1", python_version: "3.1" } });
    assert.equal(refused.is_error, true);
    assert.match(refused.content[0].text, /python_version/);
  });
});

/** Runs fn while px.eval records the requests it is given: [the requests, fn's value]. */
async function evalsOf(fn) {
  const seen = [];
  const real = px.eval.bind(px);
  px.eval = (req, ...rest) => {
    seen.push(req);
    return real(req, ...rest);
  };
  try {
    return [seen, await fn()];
  } finally {
    delete px.eval;
  }
}

describe("secrets", () => {
  test("the secrets argument reaches eval and asks for network", async () => {
    const [seen, out] = await evalsOf(() => runPython(px, { code: "1", secrets: ["GITHUB_TOKEN"] }));
    assert.deepEqual(seen.map((r) => [r.secrets, r.network]), [[["GITHUB_TOKEN"], true]]);
    assert.equal(out.isError, true); // this server has no network
    assert.match(out.text, /network access is disabled/);
    const bad = await runPython(px, { code: "1", secrets: "GITHUB_TOKEN" });
    assert.match(bad.text, /secrets must be a list of strings/);
    const cell = await runPython(px, { code: "1", secrets: ["GITHUB_TOKEN"], session_id: "ses_x" });
    assert.match(cell.text, /secrets and requirements do not apply/);
  });

  test("the network_allow argument reaches eval as the destinations", async () => {
    const [seen, out] = await evalsOf(() => runPython(px, { code: "1", network_allow: ["pypi.org:443"] }));
    assert.deepEqual(seen.map((r) => r.network), [["pypi.org:443"]]);
    assert.equal(out.isError, true); // this server has no network
    assert.match(out.text, /network access is disabled/);
    assert.match((await runPython(px, { code: "1", network_allow: "pypi.org" })).text, /network_allow must be a list of strings/);
    const cell = await runPython(px, { code: "1", network_allow: ["pypi.org:443"], session_id: "ses_x" });
    assert.match(cell.text, /network_allow, secrets and requirements do not apply/);
  });

  test("workspace: the run sees it, its changes are reported and kept", async (t) => {
    const name = "tools-" + Math.random().toString(36).slice(2, 10);
    try {
      await px.createWorkspace(name);
    } catch (e) {
      if (e.status === 501) return t.skip(`this server cannot mount workspaces: ${e.message}`);
      throw e;
    }
    await px.writeWorkspaceFile(name, "n.txt", "41");
    const out = await runPython(px, { code: "n = int(open('/workspace/n.txt').read())\nopen('/workspace/n.txt', 'w').write(str(n + 1))\nprint(n)", workspace: name });
    assert.equal(out.isError, false, out.text);
    assert.match(out.text, /--- stdout ---\n41\n/);
    assert.match(out.text, new RegExp(`workspace ${name}: version 2 \\(0 added, 1 modified, 0 deleted\\)`));
    assert.equal(new TextDecoder().decode(await px.readWorkspaceFile(name, "n.txt")), "42");
    const ro = await runPython(px, { code: "open('/workspace/n.txt', 'w').write('0')", workspace: name, workspace_read_only: true });
    assert.equal(ro.isError, true);
    assert.match(ro.text, /Read-only file system/);
    assert.match((await runPython(px, { code: "1", workspace_read_only: true })).text, /workspace_read_only needs a workspace/);
    assert.match((await runPython(px, { code: "1", workspace: name, session_id: "ses_x" })).text, /workspace does not apply/);
    assert.match((await runPython(px, { code: "1", workspace: "no-such-workspace" })).text, /^error: .*not found/);
    await px.deleteWorkspace(name);
  });
});

describe("Vercel AI SDK", () => {
  test("execute and toModelOutput (v5 and v6 call forms)", async (t) => {
    const tool = await runPythonTool(px);
    const out = await tool.execute({ code: "print('via ai')" }, { abortSignal: new AbortController().signal });
    assert.equal(out.isError, false);
    assert.match(out.executionId, /^exe_/);
    const model = tool.toModelOutput(out);
    assert.equal(model.type, "content");
    assert.match(model.value[0].text, /via ai/);
    assert.deepEqual(tool.toModelOutput({ toolCallId: "c", input: {}, output: out }), model);
    // JSON-safe, as the SDK stores tool results in messages.
    assert.deepEqual(JSON.parse(JSON.stringify(out)), out);

    const failed = tool.toModelOutput(await tool.execute({ code: "1/0" }));
    assert.equal(failed.type, "error-text");
    assert.match(failed.value, /ZeroDivisionError/);

    if (!(await plotAvailable(t))) return;
    const output = await tool.execute({ code: PLOT, requirements: ["matplotlib"] });
    const plotted = tool.toModelOutput({ toolCallId: "c", input: {}, output }); // v6 and later
    assert.equal(plotted.value[1].type, "image-data");
    assert.equal(plotted.value[1].mediaType, "image/png");
    assert.ok(plotted.value[1].data.startsWith("iVBORw0KGgo"));
    assert.equal(tool.toModelOutput(output).value[1].type, "media"); // v5
  });
});

describe("sessions through run_python", () => {
  test("session_id runs cells; what does not apply is refused", async () => {
    const s = await px.createSession();
    try {
      assert.equal((await runPython(px, { code: "x = 6", session_id: s.id })).isError, false);
      const out = await runPython(px, { code: "x * int(open('n.txt').read())", session_id: s.id, files: [{ path: "n.txt", content: "7" }] });
      assert.equal(out.isError, false, out.text);
      assert.match(out.text, /value: 42\n$/);
      const refused = await runPython(px, { code: "1", session_id: s.id, requirements: ["six"] });
      assert.equal(refused.isError, true);
      assert.match(refused.text, /requirements do not apply/);
    } finally {
      await s.close();
    }
    const gone = await runPython(px, { code: "x", session_id: s.id });
    assert.equal(gone.isError, true);
  });
});
