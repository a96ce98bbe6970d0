package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

func ExampleSandbox_StartProcess() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:7411", os.Getenv("HUTCH_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, "my-agent", nil)
	if err != nil {
		log.Fatal(err)
	}
	p, err := sb.StartProcess(ctx, "python3 -m http.server 8000", client.ProcessOptions{ID: "web"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = p.WaitForPort(ctx, 8000, client.PortWaitOptions{Timeout: 30 * time.Second})
	if errdefs.IsCode(err, errdefs.CodeProcessExitedEarly) {
		logs, _ := p.Logs(ctx)
		log.Fatalf("server died: %s", logs.Stderr)
	} else if err != nil {
		log.Fatal(err)
	}
	port, err := sb.ExposePort(ctx, 8000, client.ExposeOptions{Name: "web"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving at", port.URL)

	// Follow the output until the process exits; a cut connection is resumed transparently.
	for ev, err := range p.StreamLogs(ctx, client.LogOffsets{}) {
		if err != nil {
			log.Fatal(err) // STREAM_INCOMPLETE if the stream could not be resumed
		}
		switch ev.Type {
		case client.LogEventStdout:
			os.Stdout.Write(ev.Data)
		case client.LogEventStderr:
			os.Stderr.Write(ev.Data)
		case client.LogEventExit:
			fmt.Println("exited with", ev.ExitCode)
		}
	}
}
