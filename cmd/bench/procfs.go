package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is the CPU time used so far by this process and by the emulator
// processes it started.
type cpuSample struct {
	User, System time.Duration
	Emulators    map[string]time.Duration // by process name: "node" (fauxqs), "java" (DynamoDB Local)
}

// sampleCPU reads getrusage(RUSAGE_SELF) and, from /proc, the CPU time of
// this process's child processes (the emulators). The emulator figures are
// best effort: empty when /proc cannot be read.
func sampleCPU() (cpuSample, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}, fmt.Errorf("getrusage: %w", err)
	}
	s := cpuSample{
		User:      time.Duration(ru.Utime.Nano()),
		System:    time.Duration(ru.Stime.Nano()),
		Emulators: map[string]time.Duration{},
	}
	for _, pid := range childPIDs() {
		name, cpu, err := procCPU(pid)
		if err == nil {
			s.Emulators[name] += cpu
		}
	}
	return s, nil
}

// childPIDs lists the children of every thread of this process.
func childPIDs() []int {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	seen := map[int]bool{}
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// userHZ is the kernel's USER_HZ, the unit of /proc/<pid>/stat times; it
// is 100 on every Linux architecture Go supports.
const userHZ = 100

// procCPU returns a process's command name and user+system CPU time.
func procCPU(pid int) (string, time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	name := s[open+1 : closing]
	f := strings.Fields(s[closing+1:])
	// After the name: state is field 3 (f[0]); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return "", 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("malformed times in /proc/%d/stat", pid)
	}
	return name, time.Duration(ut+st) * time.Second / userHZ, nil
}

// cpuSince is the CPU used between two samples.
func cpuSince(before, after cpuSample) cpuSample {
	d := cpuSample{User: after.User - before.User, System: after.System - before.System, Emulators: map[string]time.Duration{}}
	for k, v := range after.Emulators {
		d.Emulators[k] = v - before.Emulators[k]
	}
	return d
}
