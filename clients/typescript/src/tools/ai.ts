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

/**
 * The model output of a tool result in the AI SDK's form (v6 and later):
 * text, and the plots as image-data parts. Under v5, which calls
 * toModelOutput with the output alone, the images are v5's media parts.
 */
export type ModelOutput =
  | { type: "content"; value: ({ type: "text"; text: string } | { type: "image-data"; data: string; mediaType: string })[] }
  | { type: "error-text"; value: string };

/** The tool object (the shape the AI SDK's tool() helper returns); S is the schema's type. */
export interface AIRunPythonTool<S = unknown> {
  description: string;
  inputSchema: S;
  execute: (input: unknown, options?: { abortSignal?: AbortSignal }) => Promise<ToolOutcomeJSON>;
  toModelOutput: (arg: { output: ToolOutcomeJSON } | ToolOutcomeJSON) => ModelOutput;
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

/** Options of runPythonTool. */
export interface RunPythonToolOptions<S> {
  /** The ai package's jsonSchema (recommended): the SDK builds the schema object itself. */
  jsonSchema?: (schema: never) => S;
  /** OpenAI strict-mode schema (optional arguments nullable), for providers that use it. */
  strict?: boolean;
}

/**
 * The run_python tool for the AI SDK, its schema from the server. Put it
 * in generateText's or streamText's tools: { run_python: await runPythonTool(px, { jsonSchema }) }.
 */
export async function runPythonTool<S = unknown>(px: PyExec, options: RunPythonToolOptions<S> = {}): Promise<AIRunPythonTool<S>> {
  const def = (await runPythonDefinition(px, "openai", options.strict ? { strict: true } : {}))["function"] as {
    description: string;
    parameters: Record<string, unknown>;
  };
  return {
    description: def.description,
    inputSchema: options.jsonSchema ? options.jsonSchema(def.parameters as never) : (plainSchema(def.parameters) as S),
    execute: async (input, opts) => toJSON(await runPython(px, input, opts?.abortSignal ? { signal: opts.abortSignal } : {})),
    toModelOutput: (arg) => {
      // v6 and later pass {toolCallId, input, output}; v5 the output alone.
      const v5 = !("output" in arg && !("text" in arg));
      const out = v5 ? (arg as ToolOutcomeJSON) : (arg as { output: ToolOutcomeJSON }).output;
      if (out.isError && out.images.length === 0) return { type: "error-text", value: out.text };
      const imageType = (v5 ? "media" : "image-data") as "image-data";
      return {
        type: "content",
        value: [{ type: "text", text: out.text }, ...out.images.map((i) => ({ type: imageType, data: i.base64, mediaType: i.mimeType }))],
      };
    },
  };
}
