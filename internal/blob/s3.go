package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hutchdev/hutch/errdefs"
)

// Defaults of S3Config.
const (
	DefaultPartSize       = 16 << 20 // bytes per multipart part
	DefaultConcurrency    = 4        // parts uploaded in parallel by one Put
	DefaultStaleUploadAge = 24 * time.Hour
	minPartSize           = 5 << 20 // S3's minimum part size
)

// S3Config configures an S3 store.
type S3Config struct {
	// Endpoint is host[:port] of the S3 API ("s3.eu-west-1.amazonaws.com", "127.0.0.1:7070").
	// An "http://" or "https://" scheme is accepted and then decides TLS.
	Endpoint string `json:"endpoint"`
	// Bucket holds the blobs. Required.
	Bucket string `json:"bucket"`
	// Region of the bucket. Default "us-east-1".
	Region string `json:"region"`
	// AccessKey and SecretKey are static credentials (S3 signature v4).
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	// Prefix is prepended to every key inside the bucket ("hutch/" stores "backups/x" as
	// "hutch/backups/x"), so several users can share a bucket. Optional; a trailing "/" is added.
	Prefix string `json:"prefix"`
	// TLS selects https. Set it for anything but a loopback test server.
	TLS bool `json:"tls"`
	// CreateBucket creates the bucket at Open if it is missing; otherwise a missing bucket fails
	// Open.
	CreateBucket bool `json:"createBucket"`
	// PartSize is the multipart part size in bytes (minimum 5 MiB). Default 16 MiB. Blobs of
	// unknown size or larger than one part are uploaded in parts.
	PartSize uint64 `json:"partSize"`
	// Concurrency is how many parts one Put uploads in parallel. Default 4. A Put of unknown
	// size buffers Concurrency × PartSize bytes in memory.
	Concurrency int `json:"concurrency"`
	// StaleUploadAge: at Open, incomplete multipart uploads under Prefix started longer ago than
	// this (a crashed Put) are aborted. Default 24 h; negative disables.
	StaleUploadAge time.Duration `json:"staleUploadAge"`
}

// S3 is a Store in an S3-compatible bucket, through minio-go. The blob under key is the object
// <Prefix><key>. Objects only become visible when a PutObject or CompleteMultipartUpload
// succeeds, and a failed multipart upload is aborted, so Put is atomic.
type S3 struct {
	client      *minio.Client
	bucket      string
	prefix      string
	endpoint    string
	partSize    uint64
	concurrency int
	log         *slog.Logger
}

var _ Store = (*S3)(nil)

// NewS3 connects to the bucket described by cfg, checks it exists (creating it when
// cfg.CreateBucket is set) and returns the store. It does not abort stale uploads: Open does, or
// call AbortStaleUploads. log may be nil. Errors: VALIDATION_FAILED (bad config, missing
// bucket), PERMISSION_DENIED (bad credentials), UNAVAILABLE (endpoint unreachable).
func NewS3(ctx context.Context, cfg S3Config, log *slog.Logger) (*S3, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, secure := cfg.Endpoint, cfg.TLS
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "blob: invalid S3 endpoint %q (want host[:port] or http(s)://host[:port])", cfg.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	if host == "" || cfg.Bucket == "" {
		return nil, errdefs.New(errdefs.CodeInvalidArgument, "blob: S3 store needs an endpoint and a bucket")
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "blob: invalid S3 prefix")
		}
		prefix += "/"
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if partSize < minPartSize {
		return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "blob: S3 part size %d is below the 5 MiB minimum", partSize)
	}
	conc := cfg.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	client, err := minio.New(host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: secure,
		Region: region,
		// Path style unless the endpoint is a known virtual-host provider (AWS, GCS, …).
		BucketLookup: minio.BucketLookupAuto,
	})
	if err != nil {
		return nil, errdefs.Wrap(errdefs.CodeInvalidArgument, err, "blob: S3 client")
	}
	s := &S3{
		client:      client,
		bucket:      cfg.Bucket,
		prefix:      prefix,
		endpoint:    client.EndpointURL().String(),
		partSize:    partSize,
		concurrency: conc,
		log:         log,
	}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, s.err(ctx, "open", "", err)
	}
	if !ok {
		if !cfg.CreateBucket {
			return nil, errdefs.Newf(errdefs.CodeInvalidArgument, "blob: S3 bucket %q does not exist at %s", cfg.Bucket, s.endpoint)
		}
		if err := client.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: region}); err != nil {
			code := minio.ToErrorResponse(err).Code
			if code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
				return nil, s.err(ctx, "create bucket", "", err)
			}
		}
		log.Info("blob: created S3 bucket", "bucket", cfg.Bucket, "endpoint", s.endpoint)
	}
	return s, nil
}

// Describe returns "s3://<bucket>/<prefix> at <endpoint URL>".
func (s *S3) Describe() string { return "s3://" + s.bucket + "/" + s.prefix + " at " + s.endpoint }

func (s *S3) object(key string) string { return s.prefix + key }

// Put uploads r. A blob of known size up to one part goes in one PutObject; anything else is a
// multipart upload of PartSize parts, Concurrency at a time, aborted on error.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	pr, err := newPutReader(ctx, r, size)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("blob put %q: %w", key, err)
	}
	opts := minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    s.partSize,
		NumThreads:  uint(s.concurrency),
	}
	upSize := size
	if size < 0 || size > int64(s.partSize) {
		// Stream in parallel parts; pr still enforces a known size exactly.
		upSize = -1
		opts.ConcurrentStreamParts = s.concurrency > 1
	}
	info, err := s.client.PutObject(ctx, s.bucket, s.object(key), pr, upSize, opts)
	if err != nil {
		// minio-go aborts its multipart upload on error, but with parallel parts a part still in
		// flight can land after the abort and leave the upload behind (seen with versitygw
		// under load): abort whatever incomplete upload of this object is left. Keys are unique
		// (backup IDs, content addresses), so this never cuts another writer's useful upload.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if rerr := s.client.RemoveIncompleteUpload(actx, s.bucket, s.object(key)); rerr != nil {
			s.log.Warn("blob put: abort of the failed upload", "key", key, "err", rerr)
		}
		cancel()
		if pr.err != nil {
			return 0, pr.err
		}
		return 0, s.err(ctx, "put", key, err)
	}
	if info.Size != pr.n {
		// Cannot happen with a conforming server; the blob is not what was read, so drop it.
		_ = s.client.RemoveObject(context.WithoutCancel(ctx), s.bucket, s.object(key), minio.RemoveObjectOptions{})
		return 0, errdefs.Newf(errdefs.CodeInternal, "blob put %q: server stored %d bytes, %d were sent", key, info.Size, pr.n)
	}
	return pr.n, nil
}

// Get starts a GET of the object. ctx governs the whole read.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.object(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s.err(ctx, "get", key, err)
	}
	oi, err := obj.Stat() // sends the GET and reads its headers
	if err != nil {
		obj.Close()
		return nil, Info{}, s.err(ctx, "get", key, err)
	}
	return &s3Reader{obj: obj, s: s, ctx: ctx, key: key}, Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// s3Reader classifies errors met while reading an object.
type s3Reader struct {
	obj *minio.Object
	s   *S3
	ctx context.Context
	key string
}

func (r *s3Reader) Read(b []byte) (int, error) {
	n, err := r.obj.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.s.err(r.ctx, "get", r.key, err)
	}
	return n, err
}

func (r *s3Reader) Close() error { return r.obj.Close() }

// Stat sends a HEAD for the object.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.err(ctx, "stat", key, err)
	}
	return Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Delete removes the object; S3 deletes of missing objects succeed.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{}); err != nil {
		err = s.err(ctx, "delete", key, err)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List lists objects under Prefix+prefix recursively. Objects whose key (after Prefix) is not a
// valid blob key, written by other tools, are skipped.
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []Info
	for oi := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if oi.Err != nil {
			return nil, s.err(ctx, "list", prefix, oi.Err)
		}
		key := strings.TrimPrefix(oi.Key, s.prefix)
		if ValidateKey(key) != nil {
			continue
		}
		out = append(out, Info{Key: key, Size: oi.Size, ModTime: oi.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("blob list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// AbortStaleUploads aborts the incomplete multipart uploads under Prefix that were started more
// than olderThan ago (left by a killed process; they are invisible but hold storage) and returns
// how many it aborted. Open runs it with S3Config.StaleUploadAge.
func (s *S3) AbortStaleUploads(ctx context.Context, olderThan time.Duration) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cutoff := time.Now().Add(-olderThan)
	core := minio.Core{Client: s.client}
	aborted := 0
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, s.prefix, true) {
		if u.Err != nil {
			return aborted, s.err(ctx, "list uploads", "", u.Err)
		}
		if u.Initiated.After(cutoff) {
			continue
		}
		if err := core.AbortMultipartUpload(ctx, s.bucket, u.Key, u.UploadID); err != nil {
			if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
				continue // finished or aborted meanwhile
			}
			return aborted, s.err(ctx, "abort upload", u.Key, err)
		}
		aborted++
		s.log.Info("blob: aborted stale S3 upload", "object", u.Key, "initiated", u.Initiated, "bucket", s.bucket)
	}
	return aborted, nil
}

// err classifies an S3 error for op on key by the server's S3 error code and HTTP status.
func (s *S3) err(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("blob %s %q: %w", op, key, cerr)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("blob %s %q: %w", op, key, err)
	}
	resp := minio.ToErrorResponse(err)
	where := "blob " + op + " (" + s.Describe() + ")"
	var e *errdefs.Error
	switch {
	case resp.Code == "NoSuchKey" || (resp.StatusCode == 404 && resp.Code != "NoSuchBucket" && resp.Code != "NoSuchUpload"):
		return notFound(key)
	case resp.Code == "NoSuchBucket":
		e = errdefs.Wrap(errdefs.CodeUnavailable, err, where+": bucket is gone")
	case resp.Code == "AccessDenied" || resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" ||
		resp.StatusCode == 401 || resp.StatusCode == 403:
		e = errdefs.Wrap(errdefs.CodePermission, err, where)
	case resp.Code == "EntityTooLarge":
		e = errdefs.Wrap(errdefs.CodeFileTooLarge, err, where)
	case (resp.StatusCode == 0 && resp.Code == "") || resp.StatusCode >= 500:
		// No HTTP answer (network) or a server-side failure.
		e = errdefs.Wrap(errdefs.CodeUnavailable, err, where)
	default:
		e = errdefs.Wrap(errdefs.CodeInternal, err, where)
	}
	if key != "" {
		e = e.With("key", key)
	}
	if resp.Code != "" {
		e = e.With("s3Code", resp.Code)
	}
	return e
}
