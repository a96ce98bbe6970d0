package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/errdefs"
)

func ExampleClient_Sandbox() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:7411", os.Getenv("HUTCH_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, "my-agent", &client.SandboxOptions{InstanceType: "basic"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sandbox", sb.ID(), "created:", sb.Created())

	if err := sb.WriteFile(ctx, "/workspace/hello.py", []byte("print('hi')\n")); err != nil {
		log.Fatal(err)
	}
	f, err := sb.ReadFile(ctx, "/workspace/missing.txt")
	switch {
	case errdefs.IsCode(err, errdefs.CodeFileNotFound):
		fmt.Println("no such file")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%d bytes\n", len(f.Content))
	}
}

func ExampleSandbox_Exec() {
	ctx := context.Background()
	c, err := client.New("", os.Getenv("HUTCH_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, "my-agent", nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := sb.Exec(ctx, "python3 -c 'import sys; print(sys.stdin.read().upper())'", &client.ExecOptions{
		Stdin:   []byte("hello"),
		Timeout: 30 * time.Second,
	})
	if errors.Is(err, errdefs.ErrDeadlineExceeded) {
		log.Fatal("command timed out")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
}

func ExampleSandbox_ExecStream() {
	ctx := context.Background()
	c, err := client.New("", os.Getenv("HUTCH_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, "my-agent", nil)
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range sb.ExecStream(ctx, "for i in 1 2 3; do echo $i; sleep 1; done", nil) {
		if err != nil {
			// An error event (e.g. COMMAND_TIMEOUT) or a stream cut before it completed
			// (STREAM_INCOMPLETE): never treat this as success.
			log.Fatal(err)
		}
		switch ev.Type {
		case client.ExecEventStdout:
			os.Stdout.Write(ev.Data)
		case client.ExecEventStderr:
			os.Stderr.Write(ev.Data)
		case client.ExecEventComplete:
			fmt.Println("exit code", ev.ExitCode)
		}
	}
}

func ExampleSandbox_Session() {
	ctx := context.Background()
	c, err := client.New("", os.Getenv("HUTCH_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, "my-agent", nil)
	if err != nil {
		log.Fatal(err)
	}
	build := sb.Session("build")
	if _, err := build.Exec(ctx, "cd /tmp && export STAGE=1", nil); err != nil {
		log.Fatal(err)
	}
	res, err := build.Exec(ctx, "echo $PWD $STAGE", nil) // "/tmp 1": cwd and exports persist
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(res.Stdout))
}
