// kubelet-writer writes ConfigMap volume updates with kubelet's own code, for the benchmark and
// the tests that must see what a user's node does: k8s.io/kubernetes' AtomicWriter.Write, with
// the ownership step kubelet's configMap volume passes it (volume.NewVolumeOwnership: with an
// fsGroup, a walk of the whole volume that chowns and chmods every file before the swap).
// test/cluster/kubelet-volume.ts is a TypeScript transcription of the same writer, ~2.5 times
// slower between the new directory and the swap; this is the writer itself.
//
// One request per line on stdin, one answer per line on stdout, in order:
//
//	{"dir": "/abs/volume", "files": {"key.yaml": "content"}, "mode": 420, "fsGroup": 2000}
//	{"swapNs": "1234567890"}  or  {"swapNs": ""} (nothing to write)  or  {"error": "..."}
//
// swapNs is CLOCK_MONOTONIC (the clock of Node's process.hrtime) at the end of the ownership
// step, the moment before the `..data_tmp` symlink and its rename over `..data`: two syscalls
// before the new files are visible. fsGroup is optional (none: no ownership step, as without
// a Pod fsGroup). It exits at the end of stdin. No Go code of this ships in config-sync.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/kubernetes/pkg/volume"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

type request struct {
	Dir     string            `json:"dir"`
	Files   map[string]string `json:"files"`
	Mode    int32             `json:"mode"`
	FsGroup *int64            `json:"fsGroup"`
}

type answer struct {
	SwapNs *string `json:"swapNs,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// readWriteMounter is the one thing the ownership step asks of kubelet's volume: whether it is
// read-only (a configMap volume's mounter says no). Any other method would panic on the nil
// interface, and none is called.
type readWriteMounter struct{ volume.Mounter }

func (readWriteMounter) GetAttributes() volume.Attributes { return volume.Attributes{ReadOnly: false} }

func monotonicNs() (string, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return "", err
	}
	return strconv.FormatInt(ts.Nano(), 10), nil
}

func write(req request) answer {
	writer, err := volumeutil.NewAtomicWriter(req.Dir, "kubelet-writer")
	if err != nil {
		return answer{Error: err.Error()}
	}
	payload := make(map[string]volumeutil.FileProjection, len(req.Files))
	for path, content := range req.Files {
		payload[path] = volumeutil.FileProjection{Data: []byte(content), Mode: req.Mode}
	}
	swap := ""
	// As kubelet's configMap volume (pkg/volume/configmap/configmap.go, SetUpAt) passes it.
	setPerms := func(_ string) error {
		owner := volume.NewVolumeOwnership(readWriteMounter{}, req.Dir, req.FsGroup, nil, nil)
		if err := owner.ChangePermissions(); err != nil {
			return err
		}
		swap, err = monotonicNs()
		return err
	}
	if err := writer.Write(payload, setPerms); err != nil {
		return answer{Error: err.Error()}
	}
	return answer{SwapNs: &swap}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		var ans answer
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			ans = answer{Error: fmt.Sprintf("bad request: %v", err)}
		} else if req.Dir == "" {
			ans = answer{Error: "bad request: no dir"}
		} else {
			ans = write(req)
		}
		if err := out.Encode(ans); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
