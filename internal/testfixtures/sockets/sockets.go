// Package sockets counts a process's TCP connections as the kernel sees
// them, for the tests and the bench that bound webhookd's outbound
// connections.
package sockets

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Established counts the TCP connections of process pid that are
// established to remotePort (IPv4 and IPv6), read from /proc.
//
// It lists the process's descriptors first, then the kernel's socket
// table, and counts each socket once. Neither read is atomic: the table is
// read in pages, and a socket moved by others opening and closing between
// two pages can be listed twice (hence counted by inode) or skipped; a
// connection opened during the reads is not counted. The count may miss a
// connection, never add one.
func Established(pid, remotePort int) (int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("list descriptors of %d: %w", pid, err)
	}
	inodes := make(map[string]bool, len(entries))
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	suffix := fmt.Sprintf(":%04X", remotePort)
	counted := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			return 0, fmt.Errorf("read the %s table: %w", table, err)
		}
		lines := strings.Split(string(b), "\n")
		for _, line := range lines[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			const established = "01"
			if len(f) > 9 && strings.HasSuffix(f[2], suffix) && f[3] == established && inodes[f[9]] {
				counted[f[9]] = true
			}
		}
	}
	return len(counted), nil
}
