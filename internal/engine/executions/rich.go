package executions

import (
	"encoding/json"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// EventDisplay is a live rich output; its Data is the JSON of an Output.
const EventDisplay EventType = "display"

// liveOutputs returns the jail's OutputFunc for a run and the decoder of
// its report: stdout and stderr go to out, the result channel to the
// driver's live decoder (when it has one), whose outputs become display
// events and then the report's outputs.
func (e *Service) liveOutputs(out sandbox.OutputFunc, publish func(EventType, string)) (sandbox.OutputFunc, func([]byte) (run.Report, error)) {
	live, ok := e.deps.Driver.(run.LiveDriver)
	if !ok {
		return out, e.deps.Driver.Parse
	}
	dec := live.Live(func(o run.Output) {
		b, err := json.Marshal(run.FastOutput{Type: o.Type, Data: run.FastData(o.Data), Metadata: o.Metadata})
		if err == nil {
			publish(EventDisplay, string(b))
		}
	})
	return func(s sandbox.Stream, p []byte) {
		if s == sandbox.Channel {
			dec.Write(p)
			return
		}
		out(s, p)
	}, dec.Report
}
