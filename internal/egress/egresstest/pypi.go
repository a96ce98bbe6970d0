package egresstest

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
)

// PyPIPackage is the one package the api server's simple index (PEP 503) serves, so a test can
// run `pip download --index-url https://api.example.test/simple/ hutch-demo` through the proxy.
const PyPIPackage = "hutch-demo"

// pypiWheel is the file name of PyPIPackage's only release.
const pypiWheel = "hutch_demo-1.0-py3-none-any.whl"

// serveSimpleIndex answers /simple/ and /simple/hutch-demo/ with PEP 503 pages.
func serveSimpleIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	switch r.URL.Path {
	case "/simple/":
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/simple/%s/\">%s</a></body></html>\n", PyPIPackage, PyPIPackage)
	case "/simple/" + PyPIPackage + "/":
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s\">%s</a></body></html>\n", pypiWheel, pypiWheel)
	default:
		http.NotFound(w, r)
	}
}

// serveWheel answers /files/<wheel> with a minimal valid wheel (a module, METADATA, WHEEL, RECORD).
func serveWheel(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/files/"+pypiWheel {
		http.NotFound(w, r)
		return
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	files := []struct{ name, body string }{
		{"hutch_demo.py", "VALUE = 42\n"},
		{"hutch_demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hutch-demo\nVersion: 1.0\n"},
		{"hutch_demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: egresstest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"hutch_demo-1.0.dist-info/RECORD", "hutch_demo.py,,\nhutch_demo-1.0.dist-info/METADATA,,\nhutch_demo-1.0.dist-info/WHEEL,,\nhutch_demo-1.0.dist-info/RECORD,,\n"},
	}
	for _, f := range files {
		fw, err := z.Create(f.name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fw.Write([]byte(f.body))
	}
	if err := z.Close(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(buf.Bytes())
}
