// Compiled (never run) by sdk-types.test.mjs: the helpers' results are
// assignable to the request types of the real SDKs, pinned in
// devDependencies, so a shape that drifts from an SDK fails the build.
import type Anthropic from "@anthropic-ai/sdk";
import { jsonSchema, tool, type ToolSet } from "ai";
import type OpenAI from "openai";

import { PyExec } from "pyexec-client";
import { runPythonTool } from "pyexec-client/ai";
import { anthropicTool, anthropicToolResult, type ToolUseBlock } from "pyexec-client/anthropic";
import {
  openaiChatTool,
  openaiFunctionCallOutput,
  openaiResponsesTool,
  openaiToolMessages,
  type ChatToolCall,
  type ResponsesFunctionCall,
} from "pyexec-client/openai";

const px = new PyExec("http://localhost:8080");

export async function chatCompletions(call: OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall): Promise<void> {
  const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [await openaiChatTool(px), await openaiChatTool(px, { strict: true })];
  const asOurs: ChatToolCall = call;
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = await openaiToolMessages(px, asOurs);
  void tools;
  void messages;
}

export async function responses(item: OpenAI.Responses.ResponseFunctionToolCall): Promise<void> {
  const tools: OpenAI.Responses.Tool[] = [await openaiResponsesTool(px, { strict: true })];
  const asOurs: ResponsesFunctionCall = item;
  const input: OpenAI.Responses.ResponseInputItem[] = [await openaiFunctionCallOutput(px, asOurs)];
  void tools;
  void input;
}

export async function anthropic(block: Anthropic.ToolUseBlock): Promise<void> {
  const tools: Anthropic.Tool[] = [await anthropicTool(px)];
  const asOurs: ToolUseBlock = block;
  const content: Anthropic.ToolResultBlockParam[] = [await anthropicToolResult(px, asOurs)];
  const message: Anthropic.MessageParam = { role: "user", content };
  void tools;
  void message;
}

export async function aiSDK(): Promise<ToolSet> {
  const run_python = await runPythonTool(px, { jsonSchema });
  return { run_python: tool(run_python) };
}
