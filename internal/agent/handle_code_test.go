package agent

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

func TestCodeContextsHTTP(t *testing.T) {
	if err := exec.Command("python3", "-c", "import IPython").Run(); err != nil {
		t.Skip("python3 with IPython is not installed")
	}
	a := startAgent(t)
	status, c := a.post("/api/contexts", obj{"language": "python", "cwd": "sub", "envVars": obj{"HUTCH_V": "v"}})
	wantError(t, status, c, http.StatusBadRequest, "INVALID_PATH") // sub does not exist yet
	a.exec(obj{"command": "mkdir -p sub"})
	status, c = a.post("/api/contexts", obj{"language": "python", "cwd": "sub", "envVars": obj{"HUTCH_V": "v"}})
	if status != http.StatusCreated || c["language"] != "python" || !strings.HasSuffix(c["cwd"].(string), "/workspace/sub") || c["createdAt"] == nil {
		t.Fatalf("create = %d %v", status, c)
	}
	id := c["id"].(string)
	evs := a.stream("/api/contexts/"+id+"/run", obj{"code": "import os\nprint(os.environ['HUTCH_V'])\nx = 41\nx + 1"})
	var stdout strings.Builder
	for _, ev := range evs[:len(evs)-2] {
		if ev["type"] != "stdout" {
			t.Fatalf("events %v", evs)
		}
		stdout.WriteString(ev["text"].(string))
	}
	n := len(evs)
	if stdout.String() != "v\n" || evs[n-2]["type"] != "result" || evs[n-2]["text"] != "42" ||
		evs[n-1]["type"] != "execution_complete" || evs[n-1]["executionCount"] != 1.0 {
		t.Fatalf("events %v", evs)
	}
	status, out := a.post("/api/contexts/"+id+"/run?buffered=1", obj{"code": "print('a')\n{'k': x}"})
	if status != 200 || out["executionCount"] != 2.0 || out["error"] != nil {
		t.Fatalf("buffered = %d %v", status, out)
	}
	if r := out["results"].([]any)[0].(obj); r["json"].(obj)["k"] != 41.0 || out["logs"].(obj)["stdout"].([]any)[0] != "a" {
		t.Fatalf("buffered = %v", out)
	}
	evs = a.stream("/api/contexts/"+id+"/run", obj{"code": "while True: pass", "timeout_ms": 500})
	if last := evs[len(evs)-1]; last["type"] != "error" || last["name"] != "TimeoutError" {
		t.Fatalf("timeout events %v", evs)
	}
	status, out = a.post("/api/contexts/"+id+"/run?buffered=1", obj{"code": "1/0"})
	if e := out["error"].(obj); status != 200 || e["name"] != "ZeroDivisionError" || len(e["traceback"].([]any)) == 0 {
		t.Fatalf("error run = %d %v", status, out)
	}
	if status, out := a.do(http.MethodGet, "/api/contexts", nil); status != 200 || len(out["contexts"].([]any)) != 1 {
		t.Fatalf("list = %d %v", status, out)
	}
	if status, out := a.post("/api/contexts/"+id+"/interrupt", nil); status != 200 || out["success"] != true {
		t.Fatalf("interrupt = %d %v", status, out)
	}
	if status, out := a.do(http.MethodDelete, "/api/contexts/"+id, nil); status != 200 || out["success"] != true {
		t.Fatalf("delete = %d %v", status, out)
	}
	status, out = a.post("/api/contexts/"+id+"/run", obj{"code": "1"})
	wantError(t, status, out, http.StatusNotFound, "CONTEXT_NOT_FOUND")
	status, out = a.do(http.MethodDelete, "/api/contexts/"+id, nil)
	wantError(t, status, out, http.StatusNotFound, "CONTEXT_NOT_FOUND")
	status, out = a.post("/api/contexts", obj{"language": "cobol"})
	wantError(t, status, out, http.StatusBadRequest, "INVALID_LANGUAGE")
	status, out = a.post("/api/run-code", obj{"language": "cobol", "code": "1"})
	wantError(t, status, out, http.StatusBadRequest, "INVALID_LANGUAGE")
	status, out = a.do(http.MethodPut, "/api/contexts", nil)
	wantError(t, status, out, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")

	status, out = a.post("/api/run-code?buffered=1", obj{"code": "2 * 21"})
	if status != 200 || out["results"].([]any)[0].(obj)["text"] != "42" {
		t.Fatalf("run-code = %d %v", status, out)
	}
	if status, out := a.do(http.MethodGet, "/api/contexts", nil); status != 200 || len(out["contexts"].([]any)) != 0 {
		t.Fatalf("run-code left a context: %v", out)
	}
}
