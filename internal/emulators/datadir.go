package emulators

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// dataDirPrefix names DynamoDB Local's database folders, so a later start
// can find the ones a killed run left behind.
const dataDirPrefix = "triage-dynamodb-"

// lockName is the file in a data folder that its owner holds an exclusive
// flock on for as long as it runs. The kernel drops the lock when the
// owner dies however it dies, so an unlockable folder is a live one and a
// lockable one is stale.
const lockName = ".owner.lock"

// staleGrace keeps a cleaner from removing a folder that another start has
// just made and not yet locked.
const staleGrace = time.Minute

// dataDir is one DynamoDB Local database folder, locked by this process.
type dataDir struct {
	path string
	lock *os.File
}

// dataBase is where database folders go: /dev/shm when it is a writable
// tmpfs (SQLite's writes then cost no disk I/O, as -inMemory did), the
// temporary directory otherwise.
func dataBase() string {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() && syscall.Access(shm, 0o2 /* W_OK */) == nil {
		return shm
	}
	return os.TempDir()
}

// newDataDir removes the stale folders of killed runs, then makes and
// locks a new one.
func newDataDir() (*dataDir, error) {
	base := dataBase()
	removeStale(base, time.Now())
	path, err := os.MkdirTemp(base, dataDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("make DynamoDB Local's data folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(path, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = flockNB(lock)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(path)
		return nil, fmt.Errorf("lock DynamoDB Local's data folder: %w", err)
	}
	return &dataDir{path: path, lock: lock}, nil
}

// remove deletes the folder and releases its lock. Nil-safe, so Stop can
// call it whether or not Start got this far.
func (d *dataDir) remove() {
	if d == nil {
		return
	}
	os.RemoveAll(d.path)
	d.lock.Close()
}

// removeStale deletes the data folders under base whose owner is gone: the
// lock is free, or (a start that died between making and locking) there is
// no lock file and the folder is older than staleGrace. It returns the
// folders it removed.
func removeStale(base string, now time.Time) []string {
	matches, _ := filepath.Glob(filepath.Join(base, dataDirPrefix+"*"))
	var removed []string
	for _, dir := range matches {
		if stale(dir, now) && os.RemoveAll(dir) == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

func stale(dir string, now time.Time) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return now.Sub(fi.ModTime()) > staleGrace
	}
	if err != nil {
		return false // not ours to judge (another user's, say)
	}
	defer f.Close()
	if flockNB(f) != nil {
		return false // its owner still runs
	}
	return true // closing f releases the lock; the folder goes next
}

// flockNB takes f's exclusive lock, or fails at once if another holds it.
func flockNB(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
