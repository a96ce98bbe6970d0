package files

import (
	"mime"
	"net/http"
	"path/filepath"
	"strings"
)

// extTypes is the extension table consulted before content sniffing. It is fixed (not the
// host's mime.types) so results do not depend on the sandbox image.
var extTypes = map[string]string{
	".txt": "text/plain", ".log": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".html": "text/html", ".htm": "text/html",
	".css": "text/css", ".js": "text/javascript", ".mjs": "text/javascript", ".cjs": "text/javascript",
	".jsx": "text/javascript", ".ts": "text/typescript", ".tsx": "text/typescript",
	".json": "application/json", ".jsonl": "application/jsonl", ".map": "application/json",
	".xml": "application/xml", ".svg": "image/svg+xml", ".yaml": "text/yaml", ".yml": "text/yaml",
	".toml": "text/toml", ".ini": "text/plain", ".cfg": "text/plain", ".conf": "text/plain",
	".py": "text/x-python", ".go": "text/x-go", ".rs": "text/x-rust", ".c": "text/x-c", ".h": "text/x-c",
	".cc": "text/x-c++", ".cpp": "text/x-c++", ".hpp": "text/x-c++", ".java": "text/x-java",
	".rb": "text/x-ruby", ".php": "text/x-php", ".sh": "text/x-shellscript", ".bash": "text/x-shellscript",
	".sql": "text/x-sql", ".r": "text/x-r", ".swift": "text/x-swift", ".kt": "text/x-kotlin",
	".lua": "text/x-lua", ".pl": "text/x-perl",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".ico": "image/x-icon", ".bmp": "image/bmp", ".pdf": "application/pdf",
	".zip": "application/zip", ".gz": "application/gzip", ".tgz": "application/gzip",
	".tar": "application/x-tar", ".bz2": "application/x-bzip2", ".xz": "application/x-xz",
	".zst": "application/zstd", ".7z": "application/x-7z-compressed", ".wasm": "application/wasm",
	".mp3": "audio/mpeg", ".wav": "audio/wav", ".ogg": "audio/ogg", ".mp4": "video/mp4",
	".webm": "video/webm", ".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf",
	".otf": "font/otf", ".exe": "application/octet-stream", ".bin": "application/octet-stream",
	".so": "application/octet-stream", ".o": "application/octet-stream", ".class": "application/java-vm",
	".jar": "application/java-archive", ".pyc": "application/x-python-code",
	".sqlite": "application/vnd.sqlite3", ".db": "application/octet-stream",
}

// DetectMIME returns the MIME type (without parameters) of the file at path whose first bytes
// are head (up to 512 are used): the extension table first, then content sniffing.
func DetectMIME(path string, head []byte) string {
	if t, ok := extTypes[extOf(path)]; ok {
		return t
	}
	t := http.DetectContentType(head)
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	return t
}

// IsBinaryMIME reports whether content of MIME type t is binary: anything but text/*, JSON,
// XML, JavaScript or x-empty.
func IsBinaryMIME(t string) bool {
	if strings.HasPrefix(t, "text/") {
		return false
	}
	for _, s := range []string{"json", "xml", "javascript", "x-empty"} {
		if strings.Contains(t, s) {
			return false
		}
	}
	return true
}

func extOf(path string) string { return strings.ToLower(filepath.Ext(path)) }
