package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/pyexec/pyexec/client"
)

// richServer plays a pyexec server for the rich-output examples.
func richServer() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/eval", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"execution_id":"exe_4","status":"completed","exit_code":0,
			"outputs":[{"type":"display","data":{"text/plain":"<Figure size 640x480 with 1 Axes>","image/png":"iVBORw0KGgo="}}],
			"results":{"rows":2},
			"files":[{"path":"out/report.csv","size":12,"sha256":"2b7e…","mime":"text/csv"}]}`)
	})
	mux.HandleFunc("GET /api/v1/executions/exe_4/files/out/report.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		io.WriteString(w, "city,temp\nOslo,3\n")
	})
	return httptest.NewServer(mux)
}

// Run an analysis that plots, returns a results dict and writes a file,
// then download the file.
func ExampleClient_DownloadFile() {
	srv := richServer() // stands in for "http://localhost:8080"
	defer srv.Close()
	c := client.New(srv.URL)
	ctx := context.Background()

	res, err := c.Eval(ctx, &client.SimpleExecRequest{
		Files: []client.CodeFile{
			{Name: "main.py", Content: "import os\nimport matplotlib.pyplot as plt\nplt.plot(df['temp'])\nplt.show()\n" +
				"os.makedirs('out', exist_ok=True)\ndf.to_csv('out/report.csv', index=False)\nresults = {'rows': len(df)}\n"},
			{Name: "data.csv", Content: "city,temp\nOslo,3\n"},
		},
		RichOptions: client.RichOptions{DataFrames: map[string]string{"df": "data.csv"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range res.Outputs {
		if mime, img, ok := o.Image(); ok {
			fmt.Printf("%s output, %d bytes\n", mime, len(img))
		}
	}
	fmt.Println("results:", string(res.Results))
	for _, f := range res.Files {
		rc, err := c.DownloadFile(ctx, res.ExecutionID, f.Path)
		if err != nil {
			log.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (%s):\n%s", f.Path, f.MIME, data)
	}
	// Output:
	// image/png output, 8 bytes
	// results: {"rows":2}
	// out/report.csv (text/csv):
	// city,temp
	// Oslo,3
}

// Send a binary data file with the code: it arrives byte for byte.
func ExampleBinaryFile() {
	f := client.BinaryFile("weights.bin", []byte{0x00, 0xff, 0x10})
	fmt.Println(f.Name, f.Encoding, f.Content)
	// Output: weights.bin base64 AP8Q
}
