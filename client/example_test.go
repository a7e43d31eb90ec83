package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/pyexec/pyexec/client"
)

// demoServer plays a pyexec server for the examples: it answers the calls
// they make the way a real server would.
func demoServer() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/exec/sync", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"execution_id":"exe_1","status":"completed","exit_code":0,"stdout":"Hello from Go!\n","duration_ms":12}`)
	})
	mux.HandleFunc("POST /api/v1/exec/async", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"execution_id":"exe_2"}`)
	})
	mux.HandleFunc("GET /api/v1/executions/exe_2", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"execution_id":"exe_2","status":"completed","exit_code":0,"stdout":"tick\ntock\n"}`)
	})
	mux.HandleFunc("GET /api/v1/executions/exe_2/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, ev := range []struct{ typ, data string }{{"status", "running"}, {"stdout", "tick\n"}, {"stdout", "tock\n"}, {"status", "completed"}} {
			payload, _ := json.Marshal(map[string]any{"seq": i + 1, "type": ev.typ, "data": ev.data, "time": time.Now()})
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", i+1, ev.typ, payload)
		}
	})
	mux.HandleFunc("POST /api/v1/eval", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"execution_id":"exe_3","status":"completed","exit_code":0,"result":"4"}`)
	})
	mux.HandleFunc("GET /api/v1/executions/exe_missing", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"execution not found"}`)
	})
	return httptest.NewServer(mux)
}

func Example() {
	srv := demoServer() // stands in for "http://localhost:8080"
	defer srv.Close()

	c := client.New(srv.URL)
	tarData, err := client.TarFromMap(map[string]string{
		"main.py": `print("Hello from Go!")`,
	})
	if err != nil {
		log.Fatal(err)
	}
	result, err := c.ExecuteSync(context.Background(), tarData, &client.Metadata{
		Entrypoint: "main.py",
		Config:     &client.ExecutionConfig{TimeoutSeconds: 30, NetworkDisabled: client.Bool(true)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(result.Stdout)
	fmt.Println("exit code:", result.ExitCode)
	// Output:
	// Hello from Go!
	// exit code: 0
}

func ExampleClient_ExecuteAsync() {
	srv := demoServer()
	defer srv.Close()
	c := client.New(srv.URL)
	ctx := context.Background()

	tarData, _ := client.TarFromMap(map[string]string{"main.py": "print('tick'); print('tock')"})
	id, err := c.ExecuteAsync(ctx, tarData, &client.Metadata{Entrypoint: "main.py"})
	if err != nil {
		log.Fatal(err)
	}
	result, err := c.WaitForCompletion(ctx, id, 500*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id, result.Status)
	fmt.Print(result.Stdout)
	// Output:
	// exe_2 completed
	// tick
	// tock
}

func ExampleClient_Follow() {
	srv := demoServer()
	defer srv.Close()
	c := client.New(srv.URL)

	for ev, err := range c.Follow(context.Background(), "exe_2") {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case client.EventStdout:
			fmt.Print("out: ", ev.Data)
		case client.EventStatus:
			fmt.Println("status:", ev.Data)
		}
	}
	// Output:
	// status: running
	// out: tick
	// out: tock
	// status: completed
}

func ExampleClient_Eval() {
	srv := demoServer()
	defer srv.Close()
	c := client.New(srv.URL)

	result, err := c.Eval(context.Background(), &client.SimpleExecRequest{
		Code:          "x = 2\nx + 2",
		PythonVersion: "3.12",
		EvalLastExpr:  true,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*result.Result)
	// Output: 4
}

func ExampleAPIError() {
	srv := demoServer()
	defer srv.Close()
	c := client.New(srv.URL)

	_, err := c.GetExecution(context.Background(), "exe_missing")
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Message)
	}
	// Output: 404 execution not found
}

func ExampleTarFromMap() {
	tarData, err := client.TarFromMap(map[string]string{
		"main.py":   "from helper import greet\ngreet()\n",
		"helper.py": "def greet(): print('hi')\n",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tarData), "bytes")
	// Output: 3072 bytes
}

func ExampleDetectEntrypoint() {
	tarData, _ := client.TarFromMap(map[string]string{
		"helper.py":   "",
		"__main__.py": "",
		"main.py":     "",
	})
	entrypoint, err := client.DetectEntrypoint(tarData)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(entrypoint)
	// Output: main.py
}

func ExampleTarFromReader() {
	tarData, err := client.TarFromReader(strings.NewReader("print('from stdin')\n"), "main.py")
	if err != nil {
		log.Fatal(err)
	}
	entrypoint, _ := client.DetectEntrypoint(tarData)
	fmt.Println(entrypoint)
	// Output: main.py
}
