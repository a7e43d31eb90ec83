package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/mcpserver"
)

// Formats of GET /api/v1/tools; OpenAI Chat Completions is the default.
const (
	toolsOpenAI          = "openai"
	toolsOpenAIResponses = "openai-responses"
	toolsAnthropic       = "anthropic"
)

type toolsInput struct {
	Format string `query:"format" enum:"openai,openai-responses,anthropic" default:"openai" doc:"openai: Chat Completions tools ({type: function, function: {...}}); openai-responses: Responses API tools ({type: function, name, description, parameters, strict}); anthropic: Messages API tools ({name, description, input_schema})"`
	Strict bool   `query:"strict" doc:"OpenAI strict mode (openai and openai-responses only): every property is required, the optional ones accept null (send null for 'not given'), additionalProperties is false at every level, and each tool says strict: true"`
}

// ToolList answers GET /api/v1/tools: the MCP server's tools as function
// definitions for a model's tool-calling API.
type ToolList struct {
	Format string `json:"format" enum:"openai,openai-responses,anthropic"`
	Strict bool   `json:"strict" doc:"Whether the schemas are in OpenAI strict form"`
	Tools  []any  `json:"tools" doc:"Pass as the tools parameter of the model API"`
}

// OpenAITool is a tool of the OpenAI Chat Completions API.
type OpenAITool struct {
	Type     string         `json:"type" enum:"function"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters" doc:"JSON Schema of the arguments"`
	Strict      bool            `json:"strict,omitempty" doc:"Present (true) with ?strict=true"`
}

// OpenAIResponsesTool is a function tool of the OpenAI Responses API. Its
// strict flag is always sent: that API enforces strict mode when it is
// absent, which the plain schemas do not satisfy.
type OpenAIResponsesTool struct {
	Type        string          `json:"type" enum:"function"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters" doc:"JSON Schema of the arguments"`
	Strict      bool            `json:"strict"`
}

// AnthropicTool is a tool of the Anthropic Messages API.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema" doc:"JSON Schema of the input"`
}

type toolsOutput struct{ Body ToolList }

func (s *Server) registerTools(hapi huma.API) {
	o := op(hapi, "list-tools", http.MethodGet, "/api/v1/tools", "Tool definitions for model function calling",
		http.StatusBadRequest, http.StatusUnauthorized)
	o.Tags = []string{"agents"}
	o.Description = "The tools of the MCP server at /mcp, ready to pass to OpenAI (Chat Completions or Responses) or " +
		"Anthropic tool calling, optionally in OpenAI strict form. Execute a call to run_python by sending its arguments " +
		"to the MCP server, or with the tool helpers of the Python and TypeScript clients."
	huma.Register(hapi, o, func(_ context.Context, in *toolsInput) (*toolsOutput, error) {
		if in.Strict && in.Format == toolsAnthropic {
			return nil, errorf(http.StatusBadRequest, "strict=true applies to the %s and %s formats, not %s",
				toolsOpenAI, toolsOpenAIResponses, toolsAnthropic)
		}
		defs := mcpserver.AvailableDefinitions(s.lintAvailable(), s.previewsOn())
		out := &toolsOutput{Body: ToolList{Format: in.Format, Strict: in.Strict, Tools: make([]any, len(defs))}}
		for i, d := range defs {
			schema := d.InputSchema
			if in.Strict {
				strict, err := strictSchema(schema)
				if err != nil {
					return nil, err
				}
				schema = strict
			}
			switch in.Format {
			case toolsAnthropic:
				out.Body.Tools[i] = AnthropicTool{Name: d.Name, Description: d.Description, InputSchema: schema}
			case toolsOpenAIResponses:
				out.Body.Tools[i] = OpenAIResponsesTool{Type: "function", Name: d.Name, Description: d.Description,
					Parameters: schema, Strict: in.Strict}
			default:
				out.Body.Tools[i] = OpenAITool{Type: "function", Function: OpenAIFunction{Name: d.Name,
					Description: d.Description, Parameters: schema, Strict: in.Strict}}
			}
		}
		return out, nil
	})
}
