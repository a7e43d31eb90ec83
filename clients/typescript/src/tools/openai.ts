/**
 * run_python for the OpenAI JS SDK, Chat Completions and Responses APIs.
 * Plain objects only: nothing here imports the openai package.
 *
 *     const tools = [await openaiChatTool(px)];
 *     const reply = await openai.chat.completions.create({ model, messages, tools });
 *     for (const call of reply.choices[0].message.tool_calls ?? []) messages.push(...(await openaiToolMessages(px, call)));
 */

import type { PyExec } from "../client.js";
import { RUN_PYTHON, runPython, runPythonDefinition, type ToolOutcome } from "./run.js";

export { RUN_PYTHON, runPython, renderResult } from "./run.js";
export type { ToolOutcome, ToolImage, RunPythonArgs } from "./run.js";

/** A Chat Completions function tool ({type: "function", function: {...}}). */
export interface ChatCompletionTool {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown>; strict?: boolean };
}

/** A Responses API function tool. */
export interface ResponsesFunctionTool {
  type: "function";
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  strict: boolean;
}

/** A tool call of a Chat Completions assistant message. */
export interface ChatToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/** A function_call item of a Responses API output. */
export interface ResponsesFunctionCall {
  type?: "function_call";
  call_id: string;
  name: string;
  arguments: string;
}

/** The messages answering a Chat Completions tool call. */
export type ChatMessage =
  | { role: "tool"; tool_call_id: string; content: string }
  | { role: "user"; content: ({ type: "text"; text: string } | { type: "image_url"; image_url: { url: string } })[] };

/** A function_call_output item of the Responses API. */
export interface FunctionCallOutput {
  type: "function_call_output";
  call_id: string;
  output: string | ({ type: "input_text"; text: string } | { type: "input_image"; image_url: string; detail: "auto" })[];
}

/** run_python as a Chat Completions tool; strict: OpenAI strict-mode schema (nullable optional arguments). */
export async function openaiChatTool(px: PyExec, options: { strict?: boolean } = {}): Promise<ChatCompletionTool> {
  return (await runPythonDefinition(px, "openai", options)) as unknown as ChatCompletionTool;
}

/** run_python as a Responses API tool (strict is always stated: that API assumes true when it is absent). */
export async function openaiResponsesTool(px: PyExec, options: { strict?: boolean } = {}): Promise<ResponsesFunctionTool> {
  return (await runPythonDefinition(px, "openai-responses", options)) as unknown as ResponsesFunctionTool;
}

async function run(px: PyExec, name: string, args: string, signal?: AbortSignal): Promise<ToolOutcome> {
  if (name !== RUN_PYTHON) return { text: `error: unknown tool ${JSON.stringify(name)}; this helper runs ${RUN_PYTHON}\n`, isError: true, images: [] };
  return runPython(px, args, signal ? { signal } : {});
}

/**
 * Runs a Chat Completions tool call and returns the messages to append:
 * the tool message with the text, then, when the code made plots, a user
 * message carrying them as image_url parts (tool messages take text only).
 */
export async function openaiToolMessages(px: PyExec, call: ChatToolCall, options: { signal?: AbortSignal } = {}): Promise<ChatMessage[]> {
  const outcome = await run(px, call.function.name, call.function.arguments, options.signal);
  const msgs: ChatMessage[] = [{ role: "tool", tool_call_id: call.id, content: outcome.text }];
  if (outcome.images.length > 0) {
    msgs.push({
      role: "user",
      content: [
        { type: "text", text: `The plots of tool call ${call.id}:` },
        ...outcome.images.map((i) => ({ type: "image_url" as const, image_url: { url: i.dataUrl } })),
      ],
    });
  }
  return msgs;
}

/**
 * Runs a Responses API function_call item and returns its
 * function_call_output: the text, and the plots as input_image parts.
 */
export async function openaiFunctionCallOutput(
  px: PyExec,
  call: ResponsesFunctionCall,
  options: { signal?: AbortSignal } = {},
): Promise<FunctionCallOutput> {
  const outcome = await run(px, call.name, call.arguments, options.signal);
  if (outcome.images.length === 0) return { type: "function_call_output", call_id: call.call_id, output: outcome.text };
  return {
    type: "function_call_output",
    call_id: call.call_id,
    output: [
      { type: "input_text", text: outcome.text },
      ...outcome.images.map((i) => ({ type: "input_image" as const, image_url: i.dataUrl, detail: "auto" as const })),
    ],
  };
}
