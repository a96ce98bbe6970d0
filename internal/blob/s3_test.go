package blob

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/hutchdev/hutch/errdefs"
)

// s3Harness gives each test its own prefix in one bucket of one versitygw.
func s3Harness(t *testing.T, v *versitygw) harness {
	var n atomic.Int64
	cfg := func() S3Config {
		return S3Config{
			Endpoint: "http://" + v.endpoint, Bucket: "hutch-test", AccessKey: v.access, SecretKey: v.secret,
			Prefix: fmt.Sprintf("t%03d/", n.Add(1)), CreateBucket: true,
			PartSize: 5 << 20, Concurrency: 3, // small parts: multipart paths run with small blobs
		}
	}
	return harness{
		open: func(t *testing.T) Store {
			s, err := Open(testCtx(t), Config{Kind: KindS3, S3: cfg()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		leftovers: func(t *testing.T, st Store) []string {
			s := st.(*S3)
			var out []string
			for u := range s.client.ListIncompleteUploads(testCtx(t), s.bucket, s.prefix, true) {
				if u.Err != nil {
					t.Fatal(u.Err)
				}
				out = append(out, "upload "+u.Key+" "+u.UploadID)
			}
			// Objects the Store would not list (invalid keys) count too.
			for oi := range s.client.ListObjects(testCtx(t), s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
				if oi.Err != nil {
					t.Fatal(oi.Err)
				}
				if ValidateKey(strings.TrimPrefix(oi.Key, s.prefix)) != nil {
					out = append(out, "object "+oi.Key)
				}
			}
			return out
		},
		racyDirs: true, // versitygw's posix backend
	}
}

func TestS3Conformance(t *testing.T) {
	v := startVersitygw(t)
	runConformance(t, s3Harness(t, v))
}

func TestS3Specifics(t *testing.T) {
	v := startVersitygw(t)
	h := s3Harness(t, v)

	t.Run("Describe", func(t *testing.T) {
		s := h.open(t).(*S3)
		d := s.Describe()
		if !strings.HasPrefix(d, "s3://hutch-test/t") || !strings.Contains(d, v.endpoint) || strings.Contains(d, v.secret) {
			t.Fatalf("Describe = %q", d)
		}
	})

	t.Run("PrefixIsolation", func(t *testing.T) {
		a, b := h.open(t), h.open(t)
		put(t, a, "meta/x.json", []byte("a"))
		if got, err := b.List(testCtx(t), ""); err != nil || len(got) != 0 {
			t.Fatalf("other prefix lists %v, %v", keys(got), err)
		}
		_, err := b.Stat(testCtx(t), "meta/x.json")
		assertNotFound(t, err, "Stat under another prefix")
	})

	t.Run("AbortStaleUploads", func(t *testing.T) {
		s := h.open(t).(*S3)
		core := minio.Core{Client: s.client}
		id, err := core.NewMultipartUpload(testCtx(t), s.bucket, s.object("backups/crashed.tar.zst"), minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := core.PutObjectPart(testCtx(t), s.bucket, s.object("backups/crashed.tar.zst"), id, 1,
			bytes.NewReader(randBytes(1, 5<<20)), 5<<20, minio.PutObjectPartOptions{}); err != nil {
			t.Fatal(err)
		}
		if left := h.leftovers(t, s); len(left) != 1 {
			t.Fatalf("leftovers before = %v, want the crashed upload", left)
		}
		// Young uploads are kept.
		if n, err := s.AbortStaleUploads(testCtx(t), DefaultStaleUploadAge); err != nil || n != 0 {
			t.Fatalf("AbortStaleUploads(24h) = %d, %v", n, err)
		}
		if n, err := s.AbortStaleUploads(testCtx(t), 0); err != nil || n != 1 {
			t.Fatalf("AbortStaleUploads(0) = %d, %v; want 1", n, err)
		}
		if left := h.leftovers(t, s); len(left) != 0 {
			t.Fatalf("leftovers after = %v", left)
		}
		_, err = s.Stat(testCtx(t), "backups/crashed.tar.zst")
		assertNotFound(t, err, "Stat of an aborted upload")
	})

	t.Run("MissingBucket", func(t *testing.T) {
		_, err := Open(testCtx(t), Config{Kind: KindS3, S3: S3Config{
			Endpoint: v.endpoint, Bucket: "no-such-bucket", AccessKey: v.access, SecretKey: v.secret,
		}}, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("Open of a missing bucket = %v, want VALIDATION_FAILED", err)
		}
	})

	t.Run("BadCredentials", func(t *testing.T) {
		_, err := Open(testCtx(t), Config{Kind: KindS3, S3: S3Config{
			Endpoint: v.endpoint, Bucket: "hutch-test", AccessKey: v.access, SecretKey: "wrong-secret",
		}}, nil)
		if !errors.Is(err, errdefs.ErrPermissionDenied) {
			t.Fatalf("Open with a wrong secret = %v (code %s), want PERMISSION_DENIED", err, errdefs.CodeOf(err))
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		_, err := NewS3(testCtx(t), S3Config{Endpoint: "127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s"}, nil)
		if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("NewS3 of a closed port = %v (code %s), want UNAVAILABLE", err, errdefs.CodeOf(err))
		}
	})
}
