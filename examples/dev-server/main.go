// Command dev-server is the reference system's preview flow, end to end, on real input: in the
// sandbox "dev-server-demo" it writes a small Vite project, runs `npm install` against the real
// npm registry (through the egress proxy), starts `npm run dev` as a background process, waits
// for Vite's "Local: http://localhost:PORT/" line, exposes the port, and fetches the page and its
// JavaScript module through the preview URL. With --browser it also loads the preview URL in
// headless Chromium and checks that the page's JavaScript ran. It prints the preview URL and
// leaves the dev server running (--keep=false destroys the sandbox instead).
package main

import (
	"bytes"
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/client"
)

//go:embed all:project
var project embed.FS

func main() {
	os.Exit(run())
}

func run() int {
	var (
		hutchURL = flag.String("url", "", "hutchd URL (default: discovered like the CLI)")
		tok      = flag.String("token", "", "API token (default: discovered like the CLI)")
		id       = flag.String("sandbox", "dev-server-demo", "sandbox ID")
		browser  = flag.String("browser", "", "Chromium binary: also render the page headless and check its JavaScript ran")
		keep     = flag.Bool("keep", true, "keep the sandbox and its dev server afterwards (false: destroy it)")
		deadline = flag.Duration("timeout", 10*time.Minute, "overall deadline")
	)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *deadline)
	defer cancelT()
	if err := demo(ctx, *hutchURL, *tok, *id, *browser, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "dev-server:", err)
		return 1
	}
	return 0
}

func demo(ctx context.Context, hutchURL, tok, id, browser string, keep bool) error {
	base, token, err := client.Discover(hutchURL, tok, nil)
	if err != nil {
		return err
	}
	c, err := client.New(base, token)
	if err != nil {
		return err
	}
	t0 := time.Now()
	sb, err := c.Sandbox(ctx, id, nil)
	if err != nil {
		return err
	}
	step("sandbox %q ready (created: %v) in %s", sb.ID(), sb.Created(), since(t0))
	if !keep {
		defer sb.Destroy(context.WithoutCancel(ctx))
	}

	// A re-run replaces an earlier dev server.
	if old, err := sb.GetProcess(ctx, "vite"); err == nil {
		old.Kill(ctx, -1)
	}
	const dir = "/workspace/vite-demo"
	err = fs.WalkDir(project, "project", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := project.ReadFile(p)
		if err != nil {
			return err
		}
		return sb.WriteFile(ctx, dir+strings.TrimPrefix(p, "project"), b)
	})
	if err != nil {
		return fmt.Errorf("write project: %w", err)
	}
	step("wrote a Vite project into %s", dir)

	step("$ npm install")
	t0 = time.Now()
	code, err := sb.ExecStreamTo(ctx, "npm install --no-audit --no-fund", &client.ExecOptions{Cwd: dir}, os.Stdout, os.Stderr)
	if err != nil {
		return fmt.Errorf("npm install: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("npm install exited with %d", code)
	}
	step("npm install done in %s", since(t0))

	t0 = time.Now()
	p, err := sb.StartProcess(ctx, "npm run dev", client.ProcessOptions{ID: "vite", Cwd: dir})
	if err != nil {
		return fmt.Errorf("start npm run dev: %w", err)
	}
	step("started background process %q (pid %d)", p.ID(), p.Info().PID)
	m, err := p.WaitForLog(ctx, `Local:\s+(http://localhost:(\d+)/)`, 2*time.Minute)
	if err != nil {
		logs, _ := p.Logs(context.WithoutCancel(ctx))
		return fmt.Errorf("waiting for Vite: %w\nstdout:\n%s\nstderr:\n%s", err, logs.Stdout, logs.Stderr)
	}
	step("Vite is ready after %s: %q (port %s)", since(t0), m.Line, m.Match[2])
	var port int
	fmt.Sscan(m.Match[2], &port)

	ep, err := sb.ExposePort(ctx, port, client.ExposeOptions{Name: "vite"})
	if err != nil {
		return fmt.Errorf("expose %d: %w", port, err)
	}
	step("preview URL: %s", ep.URL)

	hc := PreviewClient()
	page, err := get(ctx, hc, ep.URL)
	if err != nil {
		return err
	}
	if !bytes.Contains(page, []byte(`<div id="app">`)) || !bytes.Contains(page, []byte("/@vite/client")) {
		return fmt.Errorf("the preview page is not the Vite page:\n%s", page)
	}
	step("GET %s: the Vite page (%d bytes, with Vite's client injected)", ep.URL, len(page))
	js, err := get(ctx, hc, ep.URL+"src/main.js")
	if err != nil {
		return err
	}
	if !bytes.Contains(js, []byte("Hello from Vite in a Hutch sandbox")) {
		return fmt.Errorf("src/main.js through the preview URL:\n%s", js)
	}
	step("GET %ssrc/main.js: the module, served by Vite through the preview proxy", ep.URL)

	if browser != "" {
		dom, err := render(ctx, browser, ep.URL)
		if err != nil {
			return err
		}
		if !strings.Contains(dom, `data-rendered="yes"`) || !strings.Contains(dom, "Hello from Vite in a Hutch sandbox") {
			return fmt.Errorf("headless %s did not run the page's JavaScript; DOM:\n%s", browser, dom)
		}
		step("headless Chromium rendered the page through the preview URL: its JavaScript ran")
	}
	step("done: open %s in a browser on this host (*.localhost is loopback)", ep.URL)
	return nil
}

// PreviewClient returns an HTTP client that resolves *.localhost to loopback, as browsers do
// (Go's resolver and glibc do not).
func PreviewClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}}
}

func get(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return b, nil
}

// render loads u in headless Chromium and returns the DOM after its scripts ran.
func render(ctx context.Context, browser, u string) (string, error) {
	if _, err := url.Parse(u); err != nil {
		return "", err
	}
	profile, err := os.MkdirTemp("", "hutch-chromium-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--virtual-time-budget=10000", "--dump-dom", u)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --dump-dom: %w\n%s", browser, err, stderr.String())
	}
	return string(out), nil
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
