package agent

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hutchdev/hutch/api/v1/sse"
	"github.com/hutchdev/hutch/errdefs"
	"github.com/hutchdev/hutch/internal/agent/files"
	"github.com/hutchdev/hutch/internal/agentapi"
	"github.com/hutchdev/hutch/internal/fserr"
)

// streamChunk is the most source bytes of one read/stream chunk event.
const streamChunk = 65535

// handleRead: POST /api/read {path, encoding?, sessionId?} → {success, path, content,
// encoding, isBinary, mimeType, size, timestamp}. Over 32 MiB → 413 FILE_TOO_LARGE. Binary
// content (and text that is not valid UTF-8) is base64; encoding "base64" forces base64.
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ReadRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	enc := strings.ToLower(req.Encoding)
	if enc != "" && enc != "utf-8" && enc != "utf8" && enc != "base64" {
		return errdefs.Newf(errdefs.CodeInvalidArgument, "unknown encoding %q: want utf-8 or base64", req.Encoding)
	}
	data, meta, err := files.Read(p, files.MaxReadSize)
	if err != nil {
		return err
	}
	useB64 := enc == "base64" || !utf8.Valid(data) || (enc == "" && meta.IsBinary)
	reply := agentapi.ReadReply{Success: true, Path: p, IsBinary: meta.IsBinary, MimeType: meta.MIME, Size: meta.Size, Timestamp: now()}
	if useB64 {
		reply.Content, reply.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	} else {
		reply.Content, reply.Encoding = string(data), "utf-8"
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

// handleFileGet: GET /api/files?path=P&sessionId=S → the raw bytes with Content-Type (the
// detected MIME type), Content-Length and X-Hutch-Binary.
func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, err := s.resolvePath(q.Get("sessionId"), q.Get("path"))
	if err != nil {
		return err
	}
	f, meta, err := files.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", meta.MIME)
	h.Set("Content-Length", strconv.FormatInt(meta.Size, 10))
	h.Set(agentapi.HeaderBinary, strconv.FormatBool(meta.IsBinary))
	w.WriteHeader(http.StatusOK)
	if _, err := io.CopyN(w, f, meta.Size); err != nil {
		s.log.DebugContext(r.Context(), "raw file read ended early", "path", p, "err", err)
	}
	return nil
}

// handleReadStream: POST /api/read/stream {path, sessionId?} → SSE metadata{mimeType, size,
// isBinary, encoding}, chunk{data[, encoding]}…, complete{bytesRead} or error{code, error}.
// Text chunks never split a UTF-8 character; a text chunk that is not valid UTF-8 carries
// "encoding":"base64".
func (s *Server) handleReadStream(w http.ResponseWriter, r *http.Request) error {
	var req agentapi.ReadStreamRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := s.resolvePath(req.SessionID, req.Path)
	if err != nil {
		return err
	}
	f, meta, err := files.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := "utf-8"
	if meta.IsBinary {
		enc = "base64"
	}
	sw := sse.NewWriter(w)
	if err := sw.Send(agentapi.ReadMetadataEvent{Type: "metadata", MimeType: meta.MIME, Size: meta.Size, IsBinary: meta.IsBinary,
		Encoding: enc}); err != nil {
		return nil
	}
	sendChunk := func(c chunk, ok bool) error {
		if !ok {
			return nil
		}
		ev := agentapi.ReadChunkEvent{Type: "chunk", Data: c.data}
		if c.base64 {
			ev.Encoding = "base64"
		}
		return sw.Send(ev)
	}
	var text utf8Chunker
	buf := make([]byte, streamChunk-utf8.UTFMax)
	if meta.IsBinary {
		buf = make([]byte, streamChunk)
	}
	var total int64
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			total += int64(n)
			var serr error
			if meta.IsBinary {
				serr = sw.Send(agentapi.ReadChunkEvent{Type: "chunk", Data: base64.StdEncoding.EncodeToString(buf[:n])})
			} else {
				serr = sendChunk(text.push(buf[:n]))
			}
			if serr != nil {
				return nil // client gone
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			e := fserr.Map(rerr, p)
			_ = sw.Send(agentapi.ErrorEvent{Type: "error", Code: string(errdefs.CodeOf(e)), Error: e.Error(), Timestamp: now()})
			return nil
		}
	}
	if err := sendChunk(text.flush()); err != nil {
		return nil
	}
	_ = sw.Send(agentapi.ReadCompleteEvent{Type: "complete", BytesRead: total})
	return nil
}
