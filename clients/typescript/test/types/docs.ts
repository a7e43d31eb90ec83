// The TypeScript examples of docs/agents.md, type-checked against the real
// SDKs (never run: they need a model). Keep them in step with the docs.
import Anthropic from "@anthropic-ai/sdk";
import { generateText, jsonSchema, stepCountIs, type LanguageModel } from "ai";
import OpenAI from "openai";

import { PyExec } from "pyexec-client";
import { runPythonTool } from "pyexec-client/ai";
import { anthropicTool, anthropicToolResult } from "pyexec-client/anthropic";
import { openaiChatTool, openaiFunctionCallOutput, openaiResponsesTool, openaiToolMessages } from "pyexec-client/openai";

declare const process: { env: Record<string, string | undefined> };
const px = new PyExec("http://localhost:8080", { apiKey: process.env["PYEXEC_API_KEY"] });

export async function aiSDK(model: LanguageModel): Promise<string> {
  const { text } = await generateText({
    model,
    tools: { run_python: await runPythonTool(px, { jsonSchema }) },
    stopWhen: stepCountIs(8),
    prompt: "Fit a line to (1, 2), (2, 4.1), (3, 5.9) and plot it.",
  });
  return text;
}

export async function chat(): Promise<void> {
  const client = new OpenAI();
  const tools = [await openaiChatTool(px, { strict: true })];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 2**100? Compute it." }];
  for (;;) {
    const msg = (await client.chat.completions.create({ model: "gpt-4.1", messages, tools })).choices[0]!.message;
    messages.push(msg);
    if (!msg.tool_calls?.length) break;
    for (const call of msg.tool_calls) if (call.type === "function") messages.push(...(await openaiToolMessages(px, call)));
  }
}

export async function responses(): Promise<string> {
  const client = new OpenAI();
  const tools = [await openaiResponsesTool(px, { strict: true })];
  let reply = await client.responses.create({ model: "gpt-5", input: "Plot a histogram of 1000 normal samples.", tools });
  for (;;) {
    const calls = reply.output.filter((item) => item.type === "function_call");
    if (calls.length === 0) break;
    const input = await Promise.all(calls.map((call) => openaiFunctionCallOutput(px, call))); // input_text + input_image
    reply = await client.responses.create({ model: "gpt-5", previous_response_id: reply.id, input, tools });
  }
  return reply.output_text;
}

export async function claude(): Promise<void> {
  const anthropic = new Anthropic();
  const tools = [await anthropicTool(px)];
  const messages: Anthropic.MessageParam[] = [{ role: "user", content: "How many primes are below 10^6? Compute it." }];
  for (;;) {
    const reply = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 2048, tools, messages });
    messages.push({ role: "assistant", content: reply.content });
    if (reply.stop_reason !== "tool_use") break;
    const uses = reply.content.filter((b) => b.type === "tool_use");
    messages.push({ role: "user", content: await Promise.all(uses.map((b) => anthropicToolResult(px, b))) });
  }
}
