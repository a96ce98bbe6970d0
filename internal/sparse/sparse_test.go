package sparse

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		recs   map[string]string
		stored int64
		ok     bool
		err    bool
	}{
		{"not sparse", map[string]string{"SCHILY.xattr.user.a": "b"}, 10, false, false},
		{"valid", map[string]string{RecordSize: "100", RecordMap: "0,10,50,20"}, 30, true, false},
		{"all hole", map[string]string{RecordSize: "100", RecordMap: ""}, 0, true, false},
		{"all hole with data", map[string]string{RecordSize: "100", RecordMap: ""}, 5, false, true},
		{"map missing", map[string]string{RecordSize: "100"}, 0, false, true},
		{"size missing", map[string]string{RecordMap: "0,1"}, 1, false, true},
		{"bad size", map[string]string{RecordSize: "-1", RecordMap: ""}, 0, false, true},
		{"odd map", map[string]string{RecordSize: "100", RecordMap: "0,10,50"}, 10, false, true},
		{"overlap", map[string]string{RecordSize: "100", RecordMap: "0,10,5,10"}, 20, false, true},
		{"out of order", map[string]string{RecordSize: "100", RecordMap: "50,10,0,10"}, 20, false, true},
		{"past size", map[string]string{RecordSize: "100", RecordMap: "95,10"}, 10, false, true},
		{"empty extent", map[string]string{RecordSize: "100", RecordMap: "5,0"}, 0, false, true},
		{"total mismatch", map[string]string{RecordSize: "100", RecordMap: "0,10"}, 11, false, true},
		{"overflow", map[string]string{RecordSize: "9223372036854775807", RecordMap: "9223372036854775800,9223372036854775800"}, 1, false, true},
		{"not numbers", map[string]string{RecordSize: "100", RecordMap: "a,b"}, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, ok, err := Parse(tc.recs, tc.stored)
			if ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("Parse = ok %v, err %v; want ok %v, err %v", ok, err, tc.ok, tc.err)
			}
		})
	}
}

func TestExtentsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("abcd"), 1024)
	for _, off := range []int64{64 << 10, 8 << 20} {
		if _, err := f.WriteAt(data, off); err != nil {
			t.Fatal(err)
		}
	}
	size := int64(32 << 20)
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	ext, holes, err := Extents(f, size)
	if err != nil {
		t.Fatal(err)
	}
	if !holes {
		t.Skip("the temp dir's file system reports no holes")
	}
	if DataBytes(ext) >= size/2 {
		t.Fatalf("extents %v cover %d of %d bytes", ext, DataBytes(ext), size)
	}
	var stream bytes.Buffer
	if err := Copy(&stream, f, ext, make([]byte, 4096), nil); err != nil {
		t.Fatal(err)
	}
	recs := Records(size, ext)
	gotSize, gotExt, ok, err := Parse(recs, int64(stream.Len()))
	if err != nil || !ok || gotSize != size || len(gotExt) != len(ext) {
		t.Fatalf("Parse(Records) = %d %v %v %v", gotSize, gotExt, ok, err)
	}
	out, err := os.Create(filepath.Join(dir, "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := Restore(out, &stream, gotSize, gotExt, make([]byte, 4096), nil); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(out.Name())
	if !bytes.Equal(a, b) {
		t.Fatal("restored file differs")
	}
}

func TestMerge(t *testing.T) {
	var ext []Extent
	for i := range int64(1000) {
		ext = append(ext, Extent{i * 8192, 4096})
	}
	got := merge(append([]Extent(nil), ext...), 10)
	if len(got) > 10 || got[0].Off != 0 || got[len(got)-1].Off+got[len(got)-1].Len != ext[999].Off+4096 {
		t.Fatalf("merge = %d extents, %v … %v", len(got), got[0], got[len(got)-1])
	}
}
