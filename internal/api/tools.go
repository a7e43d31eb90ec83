package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/mcpserver"
)

// toolsAnthropic selects Anthropic-style definitions in GET /api/v1/tools;
// OpenAI-style is the default.
const toolsAnthropic = "anthropic"

type toolsInput struct {
	Format string `query:"format" enum:"openai,anthropic" default:"openai" doc:"openai: Chat Completions tools ({type: function, function: {...}}); anthropic: Messages API tools ({name, description, input_schema})"`
}

// ToolList answers GET /api/v1/tools: the MCP server's tools as function
// definitions for a model's tool-calling API.
type ToolList struct {
	Format string `json:"format" enum:"openai,anthropic"`
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
	o.Description = "The tools of the MCP server at /mcp, ready to pass to OpenAI- or Anthropic-style tool calling. " +
		"Execute a call to run_python by sending its arguments to the MCP server, or with the Python client's tool helper."
	huma.Register(hapi, o, func(_ context.Context, in *toolsInput) (*toolsOutput, error) {
		defs := mcpserver.AvailableDefinitions(s.lintAvailable())
		out := &toolsOutput{Body: ToolList{Format: in.Format, Tools: make([]any, len(defs))}}
		for i, d := range defs {
			if in.Format == toolsAnthropic {
				out.Body.Tools[i] = AnthropicTool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema}
			} else {
				out.Body.Tools[i] = OpenAITool{Type: "function", Function: OpenAIFunction{Name: d.Name, Description: d.Description, Parameters: d.InputSchema}}
			}
		}
		return out, nil
	})
}
