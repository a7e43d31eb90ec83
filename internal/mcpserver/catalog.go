package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool is one entry of the catalogue: its definition and the function that
// adds it, with its handler, to a server.
type tool struct {
	def *mcp.Tool
	add func(s *mcp.Server, def *mcp.Tool)
}

// tools is the catalogue: every tool the server offers, in the order
// clients list them. The MCP server and Definitions both read it, so the
// MCP tools and the function-calling schemas never drift apart.
func (h *handlers) tools() []tool {
	return []tool{
		{def: runPythonTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.runPython) }},
		{def: lintPythonTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.lintPython) }},
		{def: listFilesTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.listFiles) }},
		{def: readFileTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.readFile) }},
		{def: createSessionTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.createSession) }},
		{def: closeSessionTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.closeSession) }},
		{def: listWorkspacesTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.listWorkspaces) }},
		{def: listWorkspaceFilesTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.listWorkspaceFiles) }},
		{def: readWorkspaceFileTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.readWorkspaceFile) }},
		{def: writeWorkspaceFileTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.writeWorkspaceFile) }},
		{def: snapshotSessionTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.snapshotSession) }},
		{def: forkSessionTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.forkSession) }},
		{def: listSnapshotsTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.listSnapshots) }},
		{def: deleteSnapshotTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.deleteSnapshot) }},
		{def: previewSessionPortTool(), add: func(s *mcp.Server, def *mcp.Tool) { mcp.AddTool(s, def, h.previewSessionPort) }},
	}
}

// Definition is a tool as a model sees it: the material of an MCP tool, an
// OpenAI function or an Anthropic tool.
type Definition struct {
	// Name is the tool's name, e.g. "run_python".
	Name string
	// Description tells a model what the tool does and when to use it.
	Description string
	// InputSchema is the JSON Schema (draft 2020-12) of the arguments.
	InputSchema json.RawMessage
}

// Definitions returns the definitions of every tool the MCP server may
// offer.
func Definitions() []Definition { return AvailableDefinitions(true, true) }

// AvailableDefinitions returns the definitions of the tools a server
// offers whose lint is available or not (see Options.Lint), and whose
// previews are on or not (Options.Preview).
func AvailableDefinitions(lint, preview bool) []Definition {
	h := &handlers{}
	var defs []Definition
	for _, t := range h.tools() {
		if !offered(t.def.Name, lint, preview) {
			continue
		}
		schema, err := json.Marshal(t.def.InputSchema)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: encoding the input schema of %s: %v", t.def.Name, err))
		}
		defs = append(defs, Definition{Name: t.def.Name, Description: t.def.Description, InputSchema: schema})
	}
	return defs
}

// offered says whether a server offers the tool name: lint_python only
// with lint, preview_session_port only with previews.
func offered(name string, lint, preview bool) bool {
	switch name {
	case lintToolName:
		return lint
	case previewToolName:
		return preview
	}
	return true
}

// schemaFor derives the JSON Schema of T from its fields and their
// jsonschema tags. The types are this package's own, so a failure is a
// programming error caught by the tests, not a runtime condition.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: deriving a JSON schema: %v", err))
	}
	return s
}

// ptr returns a pointer to v, for the optional numbers of a schema.
func ptr[T any](v T) *T { return &v }
