/**
 * run_python for the Vercel AI SDK (v5 and later): a tool object for
 * generateText / streamText whose result reaches the model as text and
 * images. Nothing here imports the ai package; pass its jsonSchema to have
 * the schema built by the SDK itself.
 *
 *     import { generateText, jsonSchema, stepCountIs } from "ai";
 *     const run_python = await runPythonTool(px, { jsonSchema });
 *     await generateText({ model, tools: { run_python }, stopWhen: stepCountIs(5), prompt });
 */

import type { PyExec } from "../client.js";
import { runPython, runPythonDefinition, type ToolOutcome } from "./run.js";

export { RUN_PYTHON, runPython, renderResult } from "./run.js";
export type { ToolOutcome, ToolImage, RunPythonArgs } from "./run.js";

/** What the AI SDK's tool output content holds: text and media parts. */
export type ModelOutput =
  | { type: "content"; value: ({ type: "text"; text: string } | { type: "media"; data: string; mediaType: string })[] }
  | { type: "error-text"; value: string };

/** The tool object (the shape the AI SDK's tool() helper returns). */
export interface AIRunPythonTool {
  description: string;
  inputSchema: unknown;
  execute: (input: unknown, options?: { abortSignal?: AbortSignal }) => Promise<ToolOutcomeJSON>;
  toModelOutput: (arg: ToolOutcomeJSON | { output: ToolOutcomeJSON }) => ModelOutput;
}

/** The output of execute: JSON-safe, so the SDK can store it in messages. */
export interface ToolOutcomeJSON {
  text: string;
  isError: boolean;
  images: { mimeType: string; base64: string }[];
  executionId?: string;
}

/** The AI SDK's schema marker, as its jsonSchema() sets it. */
const SCHEMA_SYMBOL = Symbol.for("vercel.ai.schema");

/** A JSON Schema in the AI SDK's Schema form, without importing it. */
function plainSchema(schema: Record<string, unknown>): unknown {
  return { [SCHEMA_SYMBOL]: true, _type: undefined, jsonSchema: schema, validate: undefined };
}

function toJSON(o: ToolOutcome): ToolOutcomeJSON {
  const out: ToolOutcomeJSON = { text: o.text, isError: o.isError, images: o.images.map((i) => ({ mimeType: i.mimeType, base64: i.base64 })) };
  if (o.result) out.executionId = o.result.execution_id;
  return out;
}

/**
 * The run_python tool for the AI SDK, its schema from the server.
 * options.jsonSchema: the ai package's jsonSchema (recommended);
 * options.strict: OpenAI strict-mode schema (for providers that want it).
 */
export async function runPythonTool(
  px: PyExec,
  options: { jsonSchema?: (schema: never) => unknown; strict?: boolean } = {},
): Promise<AIRunPythonTool> {
  const def = (await runPythonDefinition(px, "openai", options.strict ? { strict: true } : {}))["function"] as {
    description: string;
    parameters: Record<string, unknown>;
  };
  return {
    description: def.description,
    inputSchema: options.jsonSchema ? options.jsonSchema(def.parameters as never) : plainSchema(def.parameters),
    execute: async (input, opts) => toJSON(await runPython(px, input, opts?.abortSignal ? { signal: opts.abortSignal } : {})),
    // v5 passes the output itself, later versions {toolCallId, input, output}.
    toModelOutput: (arg) => {
      const out = "output" in arg && !("text" in arg) ? arg.output : (arg as ToolOutcomeJSON);
      if (out.isError && out.images.length === 0) return { type: "error-text", value: out.text };
      return {
        type: "content",
        value: [{ type: "text", text: out.text }, ...out.images.map((i) => ({ type: "media" as const, data: i.base64, mediaType: i.mimeType }))],
      };
    },
  };
}
