package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

type idInput struct {
	ID string `path:"id" doc:"Execution id" example:"exe_3f1c2b9e-8d4a-4f7e-9c1a-2b3c4d5e6f70"`
}

// KillResult answers DELETE /api/v1/executions/{id}.
type KillResult struct {
	Status string `json:"status" enum:"pending,running,completed,failed,killed" doc:"killed, or the status the execution already had when it was not running"`
}

type killOutput struct{ Body KillResult }

type listInput struct {
	Status string `query:"status" enum:"pending,running,completed,failed,killed" doc:"Only executions in this state"`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Page size"`
	Cursor string `query:"cursor" doc:"next_cursor of the previous page"`
}

// ExecutionList is a page of executions, most recent first.
type ExecutionList struct {
	Executions []ExecutionResult `json:"executions"`
	NextCursor string            `json:"next_cursor" doc:"Pass as cursor for the next page; empty on the last page"`
}

type listOutput struct{ Body ExecutionList }

func (s *Server) registerExecutions(hapi huma.API) {
	o := op(hapi, "get-execution", http.MethodGet, "/api/v1/executions/{id}", "Get an execution",
		http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError)
	o.Tags = []string{"executions"}
	huma.Register(hapi, o, func(ctx context.Context, in *idInput) (*resultOutput, error) {
		e, err := s.eng.Get(ctx, callerFrom(ctx).engine(), in.ID)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &resultOutput{Body: newResult(e)}, nil
	})

	o = op(hapi, "kill-execution", http.MethodDelete, "/api/v1/executions/{id}", "Kill an execution",
		http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError)
	o.Tags = []string{"executions"}
	o.Description = "Every process of the execution dies; its status stays killed and partial output is kept."
	huma.Register(hapi, o, func(ctx context.Context, in *idInput) (*killOutput, error) {
		st, err := s.eng.Kill(ctx, callerFrom(ctx).engine(), in.ID)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &killOutput{Body: KillResult{Status: string(st)}}, nil
	})

	o = op(hapi, "list-executions", http.MethodGet, "/api/v1/executions", "List your executions, most recent first (an operator key: everyone's)",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusInternalServerError)
	o.Tags = []string{"executions"}
	huma.Register(hapi, o, func(ctx context.Context, in *listInput) (*listOutput, error) {
		c := callerFrom(ctx)
		list, next, err := s.eng.List(ctx, engine.ListOptions{Status: engine.Status(in.Status), Limit: in.Limit, Cursor: in.Cursor,
			Owner: c.Name, AllOwners: c.Admin})
		if err != nil {
			return nil, engineError(s.log, err)
		}
		out := &listOutput{Body: ExecutionList{Executions: make([]ExecutionResult, len(list)), NextCursor: next}}
		for i, e := range list {
			out.Body.Executions[i] = newResult(e)
		}
		return out, nil
	})
}
