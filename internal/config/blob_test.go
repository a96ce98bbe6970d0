package config

import (
	"testing"
	"time"
)

func TestBlobStoreConfig(t *testing.T) {
	cfg, err := Load([]string{"--state-dir", "/srv/h"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BlobStore != "local" || cfg.BlobDir != "/srv/h/blobs" || time.Duration(cfg.BackupGCInterval) != 10*time.Minute ||
		time.Duration(cfg.BackupOrphanAge) != time.Hour {
		t.Errorf("defaults: %q %q %v %v", cfg.BlobStore, cfg.BlobDir, cfg.BackupGCInterval, cfg.BackupOrphanAge)
	}
	cfg, err = Load([]string{"--s3-bucket", "flag-bucket", "--backup-orphan-age", "2s"}, env(map[string]string{
		"HUTCH_BLOB_STORE": "s3", "HUTCH_S3_ENDPOINT": "127.0.0.1:7070", "HUTCH_S3_BUCKET": "env-bucket",
		"HUTCH_S3_ACCESS_KEY": "ak", "HUTCH_S3_SECRET_KEY": "sk", "HUTCH_S3_TLS": "true", "HUTCH_S3_PREFIX": "hutch/",
		"HUTCH_BACKUP_GC_INTERVAL": "30s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BlobStore != "s3" || cfg.S3Endpoint != "127.0.0.1:7070" || cfg.S3Bucket != "flag-bucket" || cfg.S3AccessKey != "ak" ||
		cfg.S3SecretKey != "sk" || !cfg.S3TLS || cfg.S3Prefix != "hutch/" || time.Duration(cfg.BackupGCInterval) != 30*time.Second ||
		time.Duration(cfg.BackupOrphanAge) != 2*time.Second {
		t.Errorf("s3 config: %+v", cfg)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--blob-store", "ftp"}, nil},
		{[]string{"--blob-store", "s3"}, nil},
		{nil, map[string]string{"HUTCH_S3_TLS": "maybe"}},
		{[]string{"--backup-gc-interval", "1ms"}, nil},
		{[]string{"--blob-dir", "relative"}, nil},
	} {
		if _, err := Load(c.args, env(c.env)); !errdefsInvalid(err) {
			t.Errorf("Load(%v, %v) = %v; want an invalid-argument error", c.args, c.env, err)
		}
	}
}
