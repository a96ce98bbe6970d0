package agentapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/archive"
)

// TestWireJSON pins the JSON of every type of the protocol: a filled value and the zero value
// of each marshal to what the agent's handlers sent before the types were named (the literals
// were produced by the anonymous structs and maps they replaced). Key order is not compared;
// which keys are present is.
func TestWireJSON(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)
	end := ts.Add(time.Second)
	ec := 3
	s1, s2 := "in", "aW4="
	yes := true
	fi := FileInfo{Name: "n", AbsolutePath: "/a/n", RelativePath: "n", Type: "file", Size: 7, ModifiedAt: ts, Mode: "rw-r--r--",
		Permissions: FilePermissions{Readable: true, Writable: true, Executable: true}}
	pi := ProcessInfo{ID: "p1", PID: 42, Command: "sleep 1", Status: "failed", StartTime: ts, EndTime: &end, ExitCode: &ec,
		SessionID: "s1", Cwd: "/w", Error: "boom", Reason: "oom-killed", LogBufferBytes: 4096}
	ti := TerminalInfo{ID: "t1", Session: "s1", PID: 9, Cols: 80, Rows: 24, Viewers: 2, CreatedAt: ts, Exited: true, ExitCode: &ec}
	ce := CodeError{"ValueError", "bad", []string{"tb1", "tb2"}}
	cctx := CodeContext{ID: "c1", Language: "python", Cwd: "/w", CreatedAt: ts}
	values := map[string]any{
		"PingReply":         PingReply{Success: true, Status: "healthy", Version: "v1.2", Timestamp: ts},
		"SaveSessionsReply": SaveSessionsReply{Success: true, Saved: 2, Timestamp: ts},
		"ArchiveRequest":    ArchiveRequest{Dir: "/w", Excludes: []string{"x"}, Gitignore: true},
		"ExtractReply": ExtractReply{Success: true, Dir: "/w", Stats: archive.Stats{Files: 1, Dirs: 2, Symlinks: 3, HardLinks: 4,
			Skipped: 5, Excluded: 6, Bytes: 7}, Timestamp: ts},

		"ExecRequest":       ExecRequest{"ls", "s1", 5, map[string]string{"A": "1"}, "/w", &s1, &s2},
		"ExecReplyTail":     ExecReplyTail{"ls", 12, "s1", ts},
		"ExecStartEvent":    ExecStartEvent{"start", "ls", 42, "s1", ts},
		"OutputEvent":       OutputEvent{"stdout", "hi", "base64", ts},
		"ExecCompleteEvent": ExecCompleteEvent{"complete", 3, 12, "oom-killed", ts},
		"ErrorEvent":        ErrorEvent{"error", "FILE_NOT_FOUND", "gone", ts},

		"ListFilesRequest":  ListFilesRequest{"/a", ListFilesOptions{true, true}, "s1"},
		"ListFilesReply":    ListFilesReply{true, "/a", []FileInfo{fi}, 1, ts},
		"MkdirRequest":      MkdirRequest{"/a", true, "s1"},
		"MkdirReply":        MkdirReply{true, "/a", true, ts},
		"DeleteRequest":     DeleteRequest{"/a", true, "s1"},
		"PathReply":         PathReply{true, "/a", ts},
		"RenameRequest":     RenameRequest{"/a", "/b", "s1"},
		"MoveRequest":       MoveRequest{"/a", "/b", "s1"},
		"MoveReply":         MoveReply{true, "/a", "/b", ts},
		"ExistsRequest":     ExistsRequest{"/a", "s1"},
		"ExistsReply":       ExistsReply{true, "/a", true, ts},
		"WriteRequest":      WriteRequest{"/a", "hi", "utf-8", "s1"},
		"WriteReply":        WriteReply{true, "/a", 2, ts},
		"ReadRequest":       ReadRequest{"/a", "base64", "s1"},
		"ReadReply":         ReadReply{true, "/a", "aGk=", "base64", true, "application/octet-stream", 2, ts},
		"ReadStreamRequest": ReadStreamRequest{"/a", "s1"},
		"ReadMetadataEvent": ReadMetadataEvent{"metadata", "text/plain", 2, true, "base64"},
		"ReadChunkEvent":    ReadChunkEvent{"chunk", "hi", "base64"},
		"ReadCompleteEvent": ReadCompleteEvent{"complete", 2},

		"SessionCreateRequest": SessionCreateRequest{"s1", map[string]string{"A": "1"}, "/w"},
		"SessionCreateReply":   SessionCreateReply{true, "s1", "/w", ts},
		"SessionListReply":     SessionListReply{true, []SessionInfo{{ID: "s1", Cwd: "/w"}}, ts},
		"SessionDeleteRequest": SessionDeleteRequest{"s1"},
		"SessionDeleteReply":   SessionDeleteReply{true, "s1", ts},
		"GitCheckoutRequest":   GitCheckoutRequest{"https://x/r.git", "main", "/w/r", 1, 5, "s1"},
		"GitCheckoutReply":     GitCheckoutReply{true, "https://x/r.git", "main", "/w/r", ts},

		"ProcessInfo":         pi,
		"ProcessStartRequest": ProcessStartRequest{"sleep 1", "p1", "s1", map[string]string{"A": "1"}, "/w", 4096},
		"ProcessStartReply":   ProcessStartReply{true, "p1", 42, "sleep 1", pi, ts},
		"ProcessListReply":    ProcessListReply{true, []ProcessInfo{pi}, ts},
		"ProcessReply":        ProcessReply{true, pi, ts},
		"ProcessKillReply":    ProcessKillReply{true, "p1", true, pi, ts},
		"ProcessKillAllReply": ProcessKillAllReply{true, 2, ts},
		"ProcessLogsReply":    ProcessLogsReply{true, "p1", "o", "e", "base64", 1, 2, 3, 4, 5, 6, "failed", &ec, ts},
		"ProcessInfoEvent":    ProcessInfoEvent{"process_info", "p1", "sleep 1", "running", 42, ts},
		"ProcessOutputEvent":  ProcessOutputEvent{"stdout", "p1", "hi", "base64", 7, ts},
		"ProcessDroppedEvent": ProcessDroppedEvent{"dropped", "stdout", 1, 9, ts},
		"ProcessExitEvent":    ProcessExitEvent{"exit", "p1", &ec, "failed", "Process failed with exit code 3", ts},
		"WaitLogRequest":      WaitLogRequest{"a(b)", "ab", "stdout", 5},
		"WaitLogReply":        WaitLogReply{true, "xab", []string{"ab", "b"}, map[string]string{"g": "b"}, "stdout", ts},
		"WaitPortRequest":     WaitPortRequest{8080, "http", "/h", WaitPortStatus{200, 299}, 100, 5},
		"WaitPortReply":       WaitPortReply{true, 8080, 204, ts},
		"WaitExitRequest":     WaitExitRequest{5},
		"WaitExitReply":       WaitExitReply{true, "p1", &ec, "failed", ts},

		"CodeContext":          cctx,
		"ContextCreateRequest": ContextCreateRequest{"python", "/w", map[string]string{"A": "1"}},
		"ContextListReply":     ContextListReply{[]CodeContext{cctx}},
		"ContextReply":         ContextReply{true, "c1"},
		"RunRequest":           RunRequest{"1+1", 5, 6, "python", "/w", map[string]string{"A": "1"}},
		"CodeOutputEvent":      CodeOutputEvent{"stdout", "hi"},
		"CodeErrorEvent":       CodeErrorEvent{"error", ce},
		"CodeFailedEvent":      CodeFailedEvent{"error", ce, "CONTEXT_NOT_FOUND"},
		"CodeCompleteEvent":    CodeCompleteEvent{"execution_complete", 2},
		"CodeBufferedReply":    CodeBufferedReply{[]map[string]any{{"text": "2"}}, CodeLogs{[]string{"o"}, []string{"e"}}, &ce, 2},

		"WatchRequest":       WatchRequest{"/w", &yes, []string{"*.go"}, []string{"vendor"}},
		"WatchingEvent":      WatchingEvent{"watching", "w1", "/w", true, 3, ts},
		"WatchChangeEvent":   WatchChangeEvent{"event", "create", "/w/a", true, ts},
		"WatchOverflowEvent": WatchOverflowEvent{"overflow", -1, ts},
		"WatchErrorEvent":    WatchErrorEvent{"error", errdefs.Code("FILE_NOT_FOUND"), "gone", map[string]any{"path": "/w"}, ts},
		"WatchStoppedEvent":  WatchStoppedEvent{"stopped", "deleted", ts},
		"WatchCheckRequest":  WatchCheckRequest{"/w", "v1"},
		"WatchCheckReply":    WatchCheckReply{true, "changed", "v2", ts},

		"TerminalInfo":         ti,
		"TerminalListReply":    TerminalListReply{true, []TerminalInfo{ti}, ts},
		"TerminalKillReply":    TerminalKillReply{true, ti, ts},
		"TerminalReadyFrame":   TerminalReadyFrame{"ready", "t1", 80, 24, 9, 100},
		"TerminalExitFrame":    TerminalExitFrame{"exit", 3},
		"TerminalErrorFrame":   TerminalErrorFrame{"error", errdefs.Code("VALIDATION_FAILED"), "bad"},
		"TerminalControlFrame": TerminalControlFrame{"resize", json.RawMessage("100"), json.RawMessage("30")},
	}
	// Every value is checked filled and as its zero value ("<name>/zero").
	cases := map[string]any{}
	for name, v := range values {
		cases[name] = v
		cases[name+"/zero"] = reflect.Zero(reflect.TypeOf(v)).Interface()
	}
	for name := range wireJSON {
		if _, ok := cases[name]; !ok {
			t.Errorf("%s: expected JSON without a value", name)
		}
	}
	for name, v := range cases {
		want, ok := wireJSON[name]
		if !ok {
			t.Errorf("%s: no expected JSON", name)
			continue
		}
		got, err := json.Marshal(v)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if g, w := canonical(t, got), canonical(t, []byte(want)); g != w {
			t.Errorf("%s:\n got %s\nwant %s", name, g, w)
		}
	}
}

// canonical re-encodes a JSON document with its object keys sorted.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// wireJSON is the JSON each case must marshal to.
var wireJSON = map[string]string{
	"PingReply":                 `{"success":true,"status":"healthy","version":"v1.2","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"PingReply/zero":            `{"success":false,"status":"","version":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"SaveSessionsReply":         `{"success":true,"saved":2,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"SaveSessionsReply/zero":    `{"success":false,"saved":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ArchiveRequest":            `{"dir":"/w","excludes":["x"],"gitignore":true}`,
	"ArchiveRequest/zero":       `{"dir":""}`,
	"ExtractReply":              `{"success":true,"dir":"/w","files":1,"dirs":2,"symlinks":3,"hardLinks":4,"skipped":5,"excluded":6,"bytes":7,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ExtractReply/zero":         `{"success":false,"dir":"","files":0,"dirs":0,"symlinks":0,"hardLinks":0,"skipped":0,"excluded":0,"bytes":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ExecRequest":               `{"command":"ls","sessionId":"s1","timeoutMs":5,"env":{"A":"1"},"cwd":"/w","stdin":"in","stdinBase64":"aW4="}`,
	"ExecRequest/zero":          `{"command":"","sessionId":"","timeoutMs":0,"env":null,"cwd":"","stdin":null,"stdinBase64":null}`,
	"ExecReplyTail":             `{"command":"ls","duration":12,"sessionId":"s1","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ExecReplyTail/zero":        `{"command":"","duration":0,"sessionId":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"ExecStartEvent":            `{"type":"start","command":"ls","pid":42,"sessionId":"s1","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ExecStartEvent/zero":       `{"type":"","command":"","pid":0,"sessionId":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"OutputEvent":               `{"type":"stdout","data":"hi","encoding":"base64","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"OutputEvent/zero":          `{"type":"","data":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"ExecCompleteEvent":         `{"type":"complete","exitCode":3,"duration":12,"reason":"oom-killed","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ExecCompleteEvent/zero":    `{"type":"","exitCode":0,"duration":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ErrorEvent":                `{"type":"error","code":"FILE_NOT_FOUND","error":"gone","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ErrorEvent/zero":           `{"type":"","code":"","error":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"ListFilesRequest":          `{"path":"/a","options":{"recursive":true,"includeHidden":true},"sessionId":"s1"}`,
	"ListFilesRequest/zero":     `{"path":"","options":{"recursive":false,"includeHidden":false},"sessionId":""}`,
	"ListFilesReply":            `{"success":true,"path":"/a","files":[{"name":"n","absolutePath":"/a/n","relativePath":"n","type":"file","size":7,"modifiedAt":"2026-01-02T03:04:05.6Z","mode":"rw-r--r--","permissions":{"readable":true,"writable":true,"executable":true}}],"count":1,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ListFilesReply/zero":       `{"success":false,"path":"","files":null,"count":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"MkdirRequest":              `{"path":"/a","recursive":true,"sessionId":"s1"}`,
	"MkdirRequest/zero":         `{"path":"","recursive":false,"sessionId":""}`,
	"MkdirReply":                `{"success":true,"path":"/a","recursive":true,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"MkdirReply/zero":           `{"success":false,"path":"","recursive":false,"timestamp":"0001-01-01T00:00:00Z"}`,
	"DeleteRequest":             `{"path":"/a","recursive":true,"sessionId":"s1"}`,
	"DeleteRequest/zero":        `{"path":"","recursive":false,"sessionId":""}`,
	"PathReply":                 `{"success":true,"path":"/a","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"PathReply/zero":            `{"success":false,"path":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"RenameRequest":             `{"oldPath":"/a","newPath":"/b","sessionId":"s1"}`,
	"RenameRequest/zero":        `{"oldPath":"","newPath":"","sessionId":""}`,
	"MoveRequest":               `{"sourcePath":"/a","destinationPath":"/b","sessionId":"s1"}`,
	"MoveRequest/zero":          `{"sourcePath":"","destinationPath":"","sessionId":""}`,
	"MoveReply":                 `{"success":true,"path":"/a","newPath":"/b","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"MoveReply/zero":            `{"success":false,"path":"","newPath":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"ExistsRequest":             `{"path":"/a","sessionId":"s1"}`,
	"ExistsRequest/zero":        `{"path":"","sessionId":""}`,
	"ExistsReply":               `{"success":true,"path":"/a","exists":true,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ExistsReply/zero":          `{"success":false,"path":"","exists":false,"timestamp":"0001-01-01T00:00:00Z"}`,
	"WriteRequest":              `{"path":"/a","content":"hi","encoding":"utf-8","sessionId":"s1"}`,
	"WriteRequest/zero":         `{"path":"","content":"","encoding":"","sessionId":""}`,
	"WriteReply":                `{"success":true,"path":"/a","size":2,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"WriteReply/zero":           `{"success":false,"path":"","size":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ReadRequest":               `{"path":"/a","encoding":"base64","sessionId":"s1"}`,
	"ReadRequest/zero":          `{"path":"","encoding":"","sessionId":""}`,
	"ReadReply":                 `{"success":true,"path":"/a","content":"aGk=","encoding":"base64","isBinary":true,"mimeType":"application/octet-stream","size":2,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ReadReply/zero":            `{"success":false,"path":"","content":"","encoding":"","isBinary":false,"mimeType":"","size":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ReadStreamRequest":         `{"path":"/a","sessionId":"s1"}`,
	"ReadStreamRequest/zero":    `{"path":"","sessionId":""}`,
	"ReadMetadataEvent":         `{"type":"metadata","mimeType":"text/plain","size":2,"isBinary":true,"encoding":"base64"}`,
	"ReadMetadataEvent/zero":    `{"type":"","mimeType":"","size":0,"isBinary":false,"encoding":""}`,
	"ReadChunkEvent":            `{"type":"chunk","data":"hi","encoding":"base64"}`,
	"ReadChunkEvent/zero":       `{"type":"","data":""}`,
	"ReadCompleteEvent":         `{"type":"complete","bytesRead":2}`,
	"ReadCompleteEvent/zero":    `{"type":"","bytesRead":0}`,
	"SessionCreateRequest":      `{"id":"s1","env":{"A":"1"},"cwd":"/w"}`,
	"SessionCreateRequest/zero": `{"id":"","env":null,"cwd":""}`,
	"SessionCreateReply":        `{"success":true,"id":"s1","cwd":"/w","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"SessionCreateReply/zero":   `{"success":false,"id":"","cwd":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"SessionListReply":          `{"success":true,"sessions":[{"id":"s1","cwd":"/w"}],"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"SessionListReply/zero":     `{"success":false,"sessions":null,"timestamp":"0001-01-01T00:00:00Z"}`,
	"SessionDeleteRequest":      `{"sessionId":"s1"}`,
	"SessionDeleteRequest/zero": `{"sessionId":""}`,
	"SessionDeleteReply":        `{"success":true,"sessionId":"s1","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"SessionDeleteReply/zero":   `{"success":false,"sessionId":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"GitCheckoutRequest":        `{"repoUrl":"https://x/r.git","branch":"main","targetDir":"/w/r","depth":1,"timeoutMs":5,"sessionId":"s1"}`,
	"GitCheckoutRequest/zero":   `{"repoUrl":"","branch":"","targetDir":"","depth":0,"timeoutMs":0,"sessionId":""}`,
	"GitCheckoutReply":          `{"success":true,"repoUrl":"https://x/r.git","branch":"main","targetDir":"/w/r","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"GitCheckoutReply/zero":     `{"success":false,"repoUrl":"","branch":"","targetDir":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessInfo":               `{"id":"p1","pid":42,"command":"sleep 1","status":"failed","startTime":"2026-01-02T03:04:05.6Z","endTime":"2026-01-02T03:04:06.6Z","exitCode":3,"sessionId":"s1","cwd":"/w","error":"boom","reason":"oom-killed","logBufferBytes":4096}`,
	"ProcessInfo/zero":          `{"id":"","pid":0,"command":"","status":"","startTime":"0001-01-01T00:00:00Z","sessionId":"","cwd":""}`,
	"ProcessStartRequest":       `{"command":"sleep 1","processId":"p1","sessionId":"s1","env":{"A":"1"},"cwd":"/w","logBufferBytes":4096}`,
	"ProcessStartRequest/zero":  `{"command":"","processId":"","sessionId":"","env":null,"cwd":"","logBufferBytes":0}`,
	"ProcessStartReply":         `{"success":true,"processId":"p1","pid":42,"command":"sleep 1","process":{"id":"p1","pid":42,"command":"sleep 1","status":"failed","startTime":"2026-01-02T03:04:05.6Z","endTime":"2026-01-02T03:04:06.6Z","exitCode":3,"sessionId":"s1","cwd":"/w","error":"boom","reason":"oom-killed","logBufferBytes":4096},"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessStartReply/zero":    `{"success":false,"processId":"","pid":0,"command":"","process":{"id":"","pid":0,"command":"","status":"","startTime":"0001-01-01T00:00:00Z","sessionId":"","cwd":""},"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessListReply":          `{"success":true,"processes":[{"id":"p1","pid":42,"command":"sleep 1","status":"failed","startTime":"2026-01-02T03:04:05.6Z","endTime":"2026-01-02T03:04:06.6Z","exitCode":3,"sessionId":"s1","cwd":"/w","error":"boom","reason":"oom-killed","logBufferBytes":4096}],"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessListReply/zero":     `{"success":false,"processes":null,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessReply":              `{"success":true,"process":{"id":"p1","pid":42,"command":"sleep 1","status":"failed","startTime":"2026-01-02T03:04:05.6Z","endTime":"2026-01-02T03:04:06.6Z","exitCode":3,"sessionId":"s1","cwd":"/w","error":"boom","reason":"oom-killed","logBufferBytes":4096},"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessReply/zero":         `{"success":false,"process":{"id":"","pid":0,"command":"","status":"","startTime":"0001-01-01T00:00:00Z","sessionId":"","cwd":""},"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessKillReply":          `{"success":true,"processId":"p1","killed":true,"process":{"id":"p1","pid":42,"command":"sleep 1","status":"failed","startTime":"2026-01-02T03:04:05.6Z","endTime":"2026-01-02T03:04:06.6Z","exitCode":3,"sessionId":"s1","cwd":"/w","error":"boom","reason":"oom-killed","logBufferBytes":4096},"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessKillReply/zero":     `{"success":false,"processId":"","killed":false,"process":{"id":"","pid":0,"command":"","status":"","startTime":"0001-01-01T00:00:00Z","sessionId":"","cwd":""},"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessKillAllReply":       `{"success":true,"cleanedCount":2,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessKillAllReply/zero":  `{"success":false,"cleanedCount":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessLogsReply":          `{"success":true,"processId":"p1","stdout":"o","stderr":"e","encoding":"base64","stdoutOffset":1,"stdoutEnd":2,"stdoutDropped":3,"stderrOffset":4,"stderrEnd":5,"stderrDropped":6,"status":"failed","exitCode":3,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessLogsReply/zero":     `{"success":false,"processId":"","stdout":"","stderr":"","stdoutOffset":0,"stdoutEnd":0,"stdoutDropped":0,"stderrOffset":0,"stderrEnd":0,"stderrDropped":0,"status":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessInfoEvent":          `{"type":"process_info","processId":"p1","command":"sleep 1","status":"running","pid":42,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessInfoEvent/zero":     `{"type":"","processId":"","command":"","status":"","pid":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessOutputEvent":        `{"type":"stdout","processId":"p1","data":"hi","encoding":"base64","offset":7,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessOutputEvent/zero":   `{"type":"","processId":"","data":"","offset":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessDroppedEvent":       `{"type":"dropped","stream":"stdout","from":1,"to":9,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessDroppedEvent/zero":  `{"type":"","stream":"","from":0,"to":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"ProcessExitEvent":          `{"type":"exit","processId":"p1","exitCode":3,"status":"failed","data":"Process failed with exit code 3","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"ProcessExitEvent/zero":     `{"type":"","processId":"","status":"","data":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"WaitLogRequest":            `{"pattern":"a(b)","text":"ab","stream":"stdout","timeoutMs":5}`,
	"WaitLogRequest/zero":       `{"pattern":"","text":"","stream":"","timeoutMs":0}`,
	"WaitLogReply":              `{"success":true,"line":"xab","match":["ab","b"],"groups":{"g":"b"},"stream":"stdout","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"WaitLogReply/zero":         `{"success":false,"line":"","match":null,"stream":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"WaitPortRequest":           `{"port":8080,"mode":"http","path":"/h","status":{"min":200,"max":299},"intervalMs":100,"timeoutMs":5}`,
	"WaitPortRequest/zero":      `{"port":0,"mode":"","path":"","status":{"min":0,"max":0},"intervalMs":0,"timeoutMs":0}`,
	"WaitPortReply":             `{"success":true,"port":8080,"statusCode":204,"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"WaitPortReply/zero":        `{"success":false,"port":0,"timestamp":"0001-01-01T00:00:00Z"}`,
	"WaitExitRequest":           `{"timeoutMs":5}`,
	"WaitExitRequest/zero":      `{"timeoutMs":0}`,
	"WaitExitReply":             `{"success":true,"processId":"p1","exitCode":3,"status":"failed","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"WaitExitReply/zero":        `{"success":false,"processId":"","status":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"CodeContext":               `{"id":"c1","language":"python","cwd":"/w","createdAt":"2026-01-02T03:04:05.6Z"}`,
	"CodeContext/zero":          `{"id":"","language":"","cwd":"","createdAt":"0001-01-01T00:00:00Z"}`,
	"ContextCreateRequest":      `{"language":"python","cwd":"/w","envVars":{"A":"1"}}`,
	"ContextCreateRequest/zero": `{"language":"","cwd":"","envVars":null}`,
	"ContextListReply":          `{"contexts":[{"id":"c1","language":"python","cwd":"/w","createdAt":"2026-01-02T03:04:05.6Z"}]}`,
	"ContextListReply/zero":     `{"contexts":null}`,
	"ContextReply":              `{"success":true,"id":"c1"}`,
	"ContextReply/zero":         `{"success":false,"id":""}`,
	"RunRequest":                `{"code":"1+1","timeout_ms":5,"timeoutMs":6,"language":"python","cwd":"/w","envVars":{"A":"1"}}`,
	"RunRequest/zero":           `{"code":"","timeout_ms":0,"timeoutMs":0,"language":"","cwd":"","envVars":null}`,
	"CodeOutputEvent":           `{"type":"stdout","text":"hi"}`,
	"CodeOutputEvent/zero":      `{"type":"","text":""}`,
	"CodeErrorEvent":            `{"type":"error","name":"ValueError","value":"bad","traceback":["tb1","tb2"]}`,
	"CodeErrorEvent/zero":       `{"type":"","name":"","value":"","traceback":null}`,
	"CodeFailedEvent":           `{"type":"error","name":"ValueError","value":"bad","traceback":["tb1","tb2"],"code":"CONTEXT_NOT_FOUND"}`,
	"CodeFailedEvent/zero":      `{"type":"","name":"","value":"","traceback":null,"code":""}`,
	"CodeCompleteEvent":         `{"type":"execution_complete","executionCount":2}`,
	"CodeCompleteEvent/zero":    `{"type":"","executionCount":0}`,
	"CodeBufferedReply":         `{"results":[{"text":"2"}],"logs":{"stdout":["o"],"stderr":["e"]},"error":{"name":"ValueError","value":"bad","traceback":["tb1","tb2"]},"executionCount":2}`,
	"CodeBufferedReply/zero":    `{"results":null,"logs":{"stdout":null,"stderr":null},"error":null,"executionCount":0}`,
	"WatchRequest":              `{"path":"/w","recursive":true,"include":["*.go"],"exclude":["vendor"]}`,
	"WatchRequest/zero":         `{"path":"","recursive":null,"include":null,"exclude":null}`,
	"WatchingEvent":             `{"directories":3,"path":"/w","recursive":true,"timestamp":"2026-01-02T03:04:05.6Z","type":"watching","watchId":"w1"}`,
	"WatchingEvent/zero":        `{"directories":0,"path":"","recursive":false,"timestamp":"0001-01-01T00:00:00Z","type":"","watchId":""}`,
	"WatchChangeEvent":          `{"eventType":"create","isDirectory":true,"path":"/w/a","timestamp":"2026-01-02T03:04:05.6Z","type":"event"}`,
	"WatchChangeEvent/zero":     `{"eventType":"","isDirectory":false,"path":"","timestamp":"0001-01-01T00:00:00Z","type":""}`,
	"WatchOverflowEvent":        `{"dropped":-1,"timestamp":"2026-01-02T03:04:05.6Z","type":"overflow"}`,
	"WatchOverflowEvent/zero":   `{"dropped":0,"timestamp":"0001-01-01T00:00:00Z","type":""}`,
	"WatchErrorEvent":           `{"code":"FILE_NOT_FOUND","context":{"path":"/w"},"message":"gone","timestamp":"2026-01-02T03:04:05.6Z","type":"error"}`,
	"WatchErrorEvent/zero":      `{"code":"","message":"","timestamp":"0001-01-01T00:00:00Z","type":""}`,
	"WatchStoppedEvent":         `{"reason":"deleted","timestamp":"2026-01-02T03:04:05.6Z","type":"stopped"}`,
	"WatchStoppedEvent/zero":    `{"reason":"","timestamp":"0001-01-01T00:00:00Z","type":""}`,
	"WatchCheckRequest":         `{"path":"/w","since":"v1"}`,
	"WatchCheckRequest/zero":    `{"path":"","since":""}`,
	"WatchCheckReply":           `{"success":true,"status":"changed","version":"v2","timestamp":"2026-01-02T03:04:05.6Z"}`,
	"WatchCheckReply/zero":      `{"success":false,"status":"","version":"","timestamp":"0001-01-01T00:00:00Z"}`,
	"TerminalInfo":              `{"id":"t1","session":"s1","pid":9,"cols":80,"rows":24,"viewers":2,"createdAt":"2026-01-02T03:04:05.6Z","exited":true,"exitCode":3}`,
	"TerminalInfo/zero":         `{"id":"","session":"","pid":0,"cols":0,"rows":0,"viewers":0,"createdAt":"0001-01-01T00:00:00Z","exited":false,"exitCode":null}`,
	"TerminalListReply":         `{"success":true,"terminals":[{"id":"t1","session":"s1","pid":9,"cols":80,"rows":24,"viewers":2,"createdAt":"2026-01-02T03:04:05.6Z","exited":true,"exitCode":3}],"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"TerminalListReply/zero":    `{"success":false,"terminals":null,"timestamp":"0001-01-01T00:00:00Z"}`,
	"TerminalKillReply":         `{"success":true,"terminal":{"id":"t1","session":"s1","pid":9,"cols":80,"rows":24,"viewers":2,"createdAt":"2026-01-02T03:04:05.6Z","exited":true,"exitCode":3},"timestamp":"2026-01-02T03:04:05.6Z"}`,
	"TerminalKillReply/zero":    `{"success":false,"terminal":{"id":"","session":"","pid":0,"cols":0,"rows":0,"viewers":0,"createdAt":"0001-01-01T00:00:00Z","exited":false,"exitCode":null},"timestamp":"0001-01-01T00:00:00Z"}`,
	"TerminalReadyFrame":        `{"cols":80,"id":"t1","pid":9,"replayBytes":100,"rows":24,"type":"ready"}`,
	"TerminalReadyFrame/zero":   `{"cols":0,"id":"","pid":0,"replayBytes":0,"rows":0,"type":""}`,
	"TerminalExitFrame":         `{"code":3,"type":"exit"}`,
	"TerminalExitFrame/zero":    `{"code":0,"type":""}`,
	"TerminalErrorFrame":        `{"code":"VALIDATION_FAILED","message":"bad","type":"error"}`,
	"TerminalErrorFrame/zero":   `{"code":"","message":"","type":""}`,
	"TerminalControlFrame":      `{"type":"resize","cols":100,"rows":30}`,
	"TerminalControlFrame/zero": `{"type":"","cols":null,"rows":null}`,
}
