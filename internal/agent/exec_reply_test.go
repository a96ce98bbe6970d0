package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hutchdev/hutch/internal/agentapi"
)

// TestExecuteReplyIsExecReply: the execute reply, which handleExecute writes field by field,
// has exactly the fields of agentapi.ExecReply: it decodes into one with no field left over,
// and that marshals back to the same document.
func TestExecuteReplyIsExecReply(t *testing.T) {
	a := startAgent(t)
	for _, cmd := range []string{"echo out; echo err >&2", `printf '\377'; exit 3`} {
		out := a.exec(obj{"command": cmd})
		raw, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		var rep agentapi.ExecReply
		if err := d.Decode(&rep); err != nil {
			t.Fatalf("%s: reply %s is not an ExecReply: %v", cmd, raw, err)
		}
		again, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var back obj
		if err := json.Unmarshal(again, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, out) {
			t.Fatalf("%s: ExecReply marshals to %s; the reply was %s", cmd, again, raw)
		}
	}
}
