/**
 * run_python for the Anthropic JS SDK (Messages API). Plain objects only:
 * nothing here imports @anthropic-ai/sdk.
 *
 *     const tools = [await anthropicTool(px)];
 *     const reply = await anthropic.messages.create({ model, max_tokens, tools, messages });
 *     const results = await Promise.all(reply.content.filter((b) => b.type === "tool_use").map((b) => anthropicToolResult(px, b)));
 *     messages.push({ role: "user", content: results });
 */

import type { PyExec } from "../client.js";
import { RUN_PYTHON, runPython, runPythonDefinition } from "./run.js";

export { RUN_PYTHON, runPython, renderResult } from "./run.js";
export type { ToolOutcome, ToolImage, RunPythonArgs } from "./run.js";

/** A Messages API tool. */
export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: { type: "object"; properties?: Record<string, unknown>; required?: string[]; [key: string]: unknown };
}

/** A tool_use content block of an assistant message. */
export interface ToolUseBlock {
  type?: "tool_use";
  id: string;
  name: string;
  input: unknown;
}

/** The tool_result block answering a tool_use. */
export interface ToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  content: (
    | { type: "text"; text: string }
    | { type: "image"; source: { type: "base64"; media_type: "image/png" | "image/jpeg" | "image/gif" | "image/webp"; data: string } }
  )[];
  is_error?: boolean;
}

/** run_python as a Messages API tool. */
export async function anthropicTool(px: PyExec): Promise<AnthropicTool> {
  return (await runPythonDefinition(px, "anthropic")) as unknown as AnthropicTool;
}

/**
 * Runs a tool_use block and returns the tool_result block: the text, then
 * the plots as base64 image blocks; is_error on a Python exception, a
 * timeout or a refused request.
 */
export async function anthropicToolResult(px: PyExec, block: ToolUseBlock, options: { signal?: AbortSignal } = {}): Promise<ToolResultBlock> {
  const outcome =
    block.name === RUN_PYTHON
      ? await runPython(px, block.input, options)
      : { text: `error: unknown tool ${JSON.stringify(block.name)}; this helper runs ${RUN_PYTHON}\n`, isError: true, images: [] };
  const result: ToolResultBlock = {
    type: "tool_result",
    tool_use_id: block.id,
    content: [
      { type: "text", text: outcome.text },
      ...outcome.images.map((i) => ({
        type: "image" as const,
        source: { type: "base64" as const, media_type: i.mimeType as "image/png", data: i.base64 },
      })),
    ],
  };
  if (outcome.isError) result.is_error = true;
  return result;
}
