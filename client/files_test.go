package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hutchdev/hutch/errdefs"
)

// fileServer is a tiny in-memory stand-in for the agent's file endpoints, forwarded by hutchd.
func fileServer(t *testing.T, files map[string][]byte) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/box/write", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		path, _ := body["path"].(string)
		content, _ := body["content"].(string)
		data := []byte(content)
		switch body["encoding"] {
		case "base64":
			var err error
			if data, err = base64.StdEncoding.DecodeString(content); err != nil {
				writeEnvelope(w, errdefs.New(errdefs.CodeInvalidArgument, "bad base64"))
				return
			}
		case "utf-8":
		default:
			t.Errorf("write encoding = %v", body["encoding"])
		}
		files[path] = data
		writeJSON(w, 200, map[string]any{"success": true, "path": path, "size": len(data)})
	})
	mux.HandleFunc("PUT /v1/sandboxes/box/files", func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("PUT Content-Type = %q", ct)
		}
		if r.URL.Query().Get("sessionId") != "" && r.URL.Query().Get("sessionId") != "s1" {
			t.Errorf("PUT sessionId = %q", r.URL.Query().Get("sessionId"))
		}
		path := r.URL.Query().Get("path")
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			t.Errorf("PUT body: %v", err)
		}
		files[path] = h.Sum(nil) // the digest stands in for the (big) content
		writeJSON(w, 200, map[string]any{"success": true, "path": path, "size": n})
	})
	mux.HandleFunc("POST /v1/sandboxes/box/read", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		path, _ := body["path"].(string)
		data, ok := files[path]
		if !ok {
			writeEnvelope(w, errdefs.New(errdefs.CodeFileNotFound, "file not found").With("path", path))
			return
		}
		reply := map[string]any{"success": true, "path": path, "size": len(data), "isBinary": false,
			"mimeType": "text/plain", "encoding": "utf-8", "content": string(data)}
		if bytes.IndexByte(data, 0) >= 0 {
			reply["isBinary"], reply["mimeType"], reply["encoding"] = true, "application/octet-stream", "base64"
			reply["content"] = base64.StdEncoding.EncodeToString(data)
		}
		writeJSON(w, 200, reply)
	})
	mux.HandleFunc("GET /v1/sandboxes/box/files", func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Query().Get("path")]
		if !ok {
			writeEnvelope(w, errdefs.New(errdefs.CodeFileNotFound, "file not found"))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Header().Set("X-Hutch-Binary", "true")
		_, _ = w.Write(data)
	})
	mux.HandleFunc("POST /v1/sandboxes/box/exists", func(w http.ResponseWriter, r *http.Request) {
		path, _ := readJSON(t, r)["path"].(string)
		_, ok := files[path]
		writeJSON(w, 200, map[string]any{"success": true, "path": path, "exists": ok})
	})
	mux.HandleFunc("POST /v1/sandboxes/box/list-files", func(w http.ResponseWriter, r *http.Request) {
		body := readJSON(t, r)
		opts, _ := body["options"].(map[string]any)
		if opts["recursive"] != true || opts["includeHidden"] != false {
			t.Errorf("list options = %v", opts)
		}
		writeJSON(w, 200, map[string]any{"success": true, "path": body["path"], "count": 1, "files": []any{
			map[string]any{"name": "a.txt", "absolutePath": "/w/a.txt", "relativePath": "a.txt", "type": "file",
				"size": 3, "modifiedAt": "2025-01-01T00:00:00Z", "mode": "rw-r--r--",
				"permissions": map[string]any{"readable": true, "writable": true, "executable": false}},
		}})
	})
	for _, op := range []string{"mkdir", "delete", "rename", "move"} {
		mux.HandleFunc("POST /v1/sandboxes/box/"+op, func(w http.ResponseWriter, r *http.Request) {
			body := readJSON(t, r)
			want := map[string][]string{
				"mkdir": {"path", "recursive"}, "delete": {"path", "recursive"},
				"rename": {"oldPath", "newPath"}, "move": {"sourcePath", "destinationPath"},
			}[op]
			for _, k := range want {
				if _, ok := body[k]; !ok {
					t.Errorf("%s body %v lacks %s", op, body, k)
				}
			}
			if body["path"] == "/dir" && op == "delete" && body["recursive"] != true {
				writeEnvelope(w, errdefs.New(errdefs.CodeIsDirectory, "is a directory").With("path", "/dir"))
				return
			}
			writeJSON(w, 200, map[string]any{"success": true})
		})
	}
	return mux
}

func TestFiles(t *testing.T) {
	files := map[string][]byte{}
	c := newTestClient(t, fileServer(t, files))
	sb := c.SandboxHandle("box")
	ctx := t.Context()

	text := []byte("hello, wörld\n")
	bin := []byte{0, 1, 2, 0xff, 0xfe}
	if err := sb.WriteFile(ctx, "/t.txt", text); err != nil {
		t.Fatalf("WriteFile(text) = %v", err)
	}
	if err := sb.WriteFile(ctx, "/b.bin", bin); err != nil {
		t.Fatalf("WriteFile(binary) = %v", err)
	}
	if !bytes.Equal(files["/t.txt"], text) || !bytes.Equal(files["/b.bin"], bin) {
		t.Errorf("server got %q and %q", files["/t.txt"], files["/b.bin"])
	}

	fc, err := sb.ReadFile(ctx, "/b.bin")
	if err != nil {
		t.Fatalf("ReadFile = %v", err)
	}
	if !bytes.Equal(fc.Content, bin) || !fc.IsBinary || fc.Size != int64(len(bin)) || fc.Path != "/b.bin" {
		t.Errorf("ReadFile(binary) = %+v", fc)
	}
	fc, err = sb.ReadFile(ctx, "/t.txt")
	if err != nil || !bytes.Equal(fc.Content, text) || fc.IsBinary || fc.MimeType != "text/plain" {
		t.Errorf("ReadFile(text) = %+v, %v", fc, err)
	}
	_, err = sb.ReadFile(ctx, "/missing")
	if !errors.Is(err, errdefs.ErrNotFound) || !errdefs.IsCode(err, errdefs.CodeFileNotFound) {
		t.Errorf("ReadFile(missing) = %v; want FILE_NOT_FOUND", err)
	}

	body, meta, err := sb.OpenFile(ctx, "/b.bin")
	if err != nil {
		t.Fatalf("OpenFile = %v", err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Equal(got, bin) || meta.Size != int64(len(bin)) || !meta.IsBinary ||
		meta.MimeType != "application/octet-stream" {
		t.Errorf("OpenFile = %q, %+v, %v", got, meta, err)
	}
	if _, _, err := sb.OpenFile(ctx, "/missing"); !errdefs.IsCode(err, errdefs.CodeFileNotFound) {
		t.Errorf("OpenFile(missing) = %v; want FILE_NOT_FOUND", err)
	}

	ok, err := sb.Exists(ctx, "/t.txt")
	if err != nil || !ok {
		t.Errorf("Exists(/t.txt) = %v, %v", ok, err)
	}
	ok, err = sb.Exists(ctx, "/nope")
	if err != nil || ok {
		t.Errorf("Exists(/nope) = %v, %v", ok, err)
	}

	list, err := sb.ListFiles(ctx, "/w", &ListOptions{Recursive: true})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListFiles = %v, %v", list, err)
	}
	want := FileInfo{Name: "a.txt", AbsolutePath: "/w/a.txt", RelativePath: "a.txt", Type: FileTypeFile, Size: 3,
		ModifiedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Mode: "rw-r--r--",
		Permissions: FilePermissions{Readable: true, Writable: true}}
	if list[0] != want {
		t.Errorf("ListFiles()[0] = %+v; want %+v", list[0], want)
	}

	if err := sb.Mkdir(ctx, "/d", true); err != nil {
		t.Errorf("Mkdir = %v", err)
	}
	if err := sb.DeleteFile(ctx, "/dir", false); !errdefs.IsCode(err, errdefs.CodeIsDirectory) {
		t.Errorf("DeleteFile(dir, false) = %v; want IS_DIRECTORY", err)
	}
	if err := sb.DeleteFile(ctx, "/dir", true); err != nil {
		t.Errorf("DeleteFile(dir, true) = %v", err)
	}
	if err := sb.RenameFile(ctx, "/a", "/b"); err != nil {
		t.Errorf("RenameFile = %v", err)
	}
	if err := sb.MoveFile(ctx, "/a", "/b"); err != nil {
		t.Errorf("MoveFile = %v", err)
	}
}

// TestWriteFileFromStreams sends more than the JSON body limit through the raw PUT.
func TestWriteFileFromStreams(t *testing.T) {
	files := map[string][]byte{}
	c := newTestClient(t, fileServer(t, files))
	const size = 64 << 20
	src := io.LimitReader(zeroReader{}, size)
	n, err := c.SandboxHandle("box").Session("s1").WriteFileFrom(t.Context(), "/big", src)
	if err != nil || n != size {
		t.Fatalf("WriteFileFrom = %d, %v; want %d", n, err, size)
	}
	h := sha256.New()
	_, _ = io.Copy(h, io.LimitReader(zeroReader{}, size))
	if !bytes.Equal(files["/big"], h.Sum(nil)) {
		t.Errorf("server received different bytes")
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
