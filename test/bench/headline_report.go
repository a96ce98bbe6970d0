package main

import (
	"fmt"
	"io"
	goruntime "runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/internal/image"
	"github.com/hutchdev/hutch/internal/sandbox"
)

// secs formats d in seconds with three decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// line prints one single-run figure.
func line(w io.Writer, name string, d time.Duration, note string) {
	fmt.Fprintf(w, "  %-46s %12s  %s\n", name, secs(d), note)
}

// seriesLine prints a series as its median, with n, min and max.
func seriesLine(w io.Writer, s *series) {
	sum := s.summarize()
	fmt.Fprintf(w, "  %-46s %12s  median of %d (min %s, max %s)\n", s.name, secs(sum.median), sum.n, secs(sum.min), secs(sum.max))
}

func med(s *series) time.Duration { return s.summarize().median }

// report prints the headline's figures, ratios and goals.
func (h *headline) report(w io.Writer, it sandbox.InstanceType, img image.Image, took time.Duration, load string) {
	fmt.Fprintf(w, "Hutch lifecycle headline (issue 4), %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "  host:          %d cores, %s; %s\n", goruntime.NumCPU(), cpuModel(), kernel())
	fmt.Fprintf(w, "  image:         %s (%s, %d packages)\n", img.ID, img.Suite, len(img.Packages))
	fmt.Fprintf(w, "  instance type: %s (cpu %dm, memory %d MiB)\n", it.Name, it.MilliCPU, it.MemoryBytes>>20)
	fmt.Fprintf(w, "  blob store:    local directory (hutchd's default), on the same disk\n")
	fmt.Fprintf(w, "  project:       axios's dependencies + devDependencies (test/bench/testdata/headline)\n")
	fmt.Fprintf(w, "  node_modules:  %.1f MiB in %d entries (du -sb; find | wc -l)\n", mib(h.nmBytes), h.nmFiles)
	fmt.Fprintf(w, "  project dir:   %.1f MiB in %d entries; npm cache %.1f MiB; sandbox disk (upper) %.1f MiB\n",
		mib(h.projBytes), h.projFiles, mib(h.npmCacheBytes), mib(h.upperBytes))
	fmt.Fprintf(w, "  load average:  %s (other work on the host shares the disk and CPUs)\n", load)
	fmt.Fprintf(w, "  run:           %s in all; -hn %d iterations where marked \"median\", single runs elsewhere\n", took.Round(time.Second), h.cfg.hn)

	aTotal := h.create + h.clone + h.npmCI
	fmt.Fprintf(w, "\n(a) New sandbox, git checkout, npm ci (single run)\n")
	line(w, "create sandbox", h.create, "")
	line(w, "gitCheckout --depth 1 (git server on the host)", h.clone, "")
	line(w, "npm ci (npm registry, through the egress proxy)", h.npmCI, "")
	line(w, "total", aTotal, fmt.Sprintf("reference: %s (start + clone axios + npm install)", secs(refStartCloneInstall)))

	fmt.Fprintf(w, "\n(b) Backup of %s\n", hlDir)
	seriesLine(w, &h.backup)
	seriesLine(w, &h.hostTar)
	seriesLine(w, &h.sbTar)
	fmt.Fprintf(w, "  archive: hutch %.1f MiB, host baseline %.1f MiB (zstd level 1 both)\n", mib(h.backupBytes), mib(h.tarBytes))

	fmt.Fprintf(w, "\n(c) Restore (a mount of the backup's tree) into a fresh sandbox until `%s` runs\n", hlFirstCmd)
	seriesLine(w, &h.rsCreate)
	seriesLine(w, &h.rsBlobCall)
	seriesLine(w, &h.rsBlob)
	seriesLine(w, &h.rsCachedCall)
	seriesLine(w, &h.rsCached)
	seriesLine(w, &h.rsCachedTotal)
	seriesLine(w, &h.rsNode)
	fmt.Fprintf(w, "  reference: %s (restore from a backup)\n", secs(refRestore))
	seriesLine(w, &h.hostUntar)
	seriesLine(w, &h.shmUntar)

	fmt.Fprintf(w, "\n(d) Snapshot and forks\n")
	line(w, "Snapshot (whole disk, npm cache included)", h.snapshot,
		fmt.Sprintf("single run; layer %.1f MiB tar, %.1f MiB stored", mib(h.snapTarBytes), mib(h.snapBytes)))
	seriesLine(w, &h.firstCmd)
	seriesLine(w, &h.fromSnap)
	seriesLine(w, &h.fromSnapCreate)
	seriesLine(w, &h.fork4)
	line(w, "sandbox from snapshot, layer from blob store", h.fromBlob,
		fmt.Sprintf("single run; create (fetch + extract) %s, after an hutchd restart", secs(h.fromBlobCreate)))
	line(w, fmt.Sprintf("Fork(%d) → each reads (snapshot + forks)", hlForks), h.forkAPI,
		fmt.Sprintf("single run; server: snapshot %.0f ms, forks %.0f ms", h.forkAPISnap, h.forkAPIFork))

	fmt.Fprintf(w, "\nRatios\n")
	ratioLine(w, "(a) total / reference 30 s", aTotal, refStartCloneInstall)
	ratioLine(w, "(b) CreateBackup / host tar | zstd", med(&h.backup), med(&h.hostTar))
	ratioLine(w, "(b) CreateBackup / in-sandbox tar c", med(&h.backup), med(&h.sbTar))
	ratioLine(w, "(c) restore (blob store) → first command / reference 2 s", med(&h.rsBlob), refRestore)
	ratioLine(w, "(c) restore (cached) → first command / reference 2 s", med(&h.rsCached), refRestore)
	ratioLine(w, "(c) RestoreBackup (blob store) / host zstd -d | tar x", med(&h.rsBlobCall), med(&h.hostUntar))
	ratioLine(w, "(c) RestoreBackup (blob store) / the same into tmpfs", med(&h.rsBlobCall), med(&h.shmUntar))
	ratioLine(w, "(c) RestoreBackup (cached) / host zstd -d | tar x", med(&h.rsCachedCall), med(&h.hostUntar))
	ratioLine(w, "(d) from snapshot (cached) / reference 2 s", med(&h.fromSnap), refRestore)
	ratioLine(w, "(d) from snapshot (blob store) / reference 2 s", h.fromBlob, refRestore)
	ratioLine(w, "(d) from snapshot (cached) / restore backup (cached)", med(&h.fromSnap), med(&h.rsCachedTotal))
	ratioLine(w, "(a) total / (d) from snapshot (cached)", aTotal, med(&h.fromSnap))

	fmt.Fprintf(w, "\nGoals (issue 4)\n")
	goal(w, "restore, cached: RestoreBackup → first command", med(&h.rsCached), goalRestoreCached)
	goal(w, "  with the sandbox's create", med(&h.rsCachedTotal), goalRestoreCached)
	goal(w, "restore, layer cached: sandbox from snapshot → first command", med(&h.fromSnap), goalRestoreCached)
	goal(w, "  the create call alone (no command)", med(&h.fromSnapCreate), goalRestoreCached)
	goal(w, "restore from object storage: from snapshot, layer fetched", h.fromBlob, goalRestoreBlob)
	goal(w, "restore from object storage: RestoreBackup → first command", med(&h.rsBlob), goalRestoreBlob)
	goal(w, "backup: CreateBackup of the project", med(&h.backup), goalBackup)
	goal(w, fmt.Sprintf("fork of %d from a snapshot → each reads", hlForks), med(&h.fork4), goalFork4)
	goal(w, fmt.Sprintf("snapshot + fork of %d (Fork API) → each reads", hlForks), h.forkAPI, goalFork4)
	fmt.Fprintf(w, "  (object storage here is hutchd's local blob store; S3 adds the transfer)\n")
}

func ratioLine(w io.Writer, name string, a, b time.Duration) {
	fmt.Fprintf(w, "  %-50s %8.2f×\n", name, ratio(a, b))
}

func goal(w io.Writer, name string, d, target time.Duration) {
	fmt.Fprintf(w, "  %-62s %10s  goal ≤ %-5g s  %s\n", name, secs(d), target.Seconds(), verdict(d <= target, fmt.Sprintf("%.1f× the goal", ratio(d, target))))
}

func kernel() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
}
