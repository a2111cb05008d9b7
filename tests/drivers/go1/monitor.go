// The Go driver v1's side of tests/drivers/monitoring (heartbeats_go1):
//
//	modern-go1 monitor URI SECONDS HEARTBEAT_MS
//
// connects with the default server monitoring mode (auto: streaming when the
// server's hello carries topologyVersion), pings, then stays idle for SECONDS
// and prints one JSON line {started, succeeded, awaited, failed, driver}: the
// heartbeat events of that window, awaited = ServerHeartbeatSucceededEvent.Awaited.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/event"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/version"
)

// heartbeats counts heartbeat events while counting is on.
type heartbeats struct {
	mu       sync.Mutex
	counting bool
	n        map[string]int
}

func (h *heartbeats) add(k string) {
	h.mu.Lock()
	if h.counting {
		h.n[k]++
	}
	h.mu.Unlock()
}

func (h *heartbeats) setCounting(on bool) {
	h.mu.Lock()
	h.counting = on
	h.mu.Unlock()
}

func monitorFail(what string, err error) {
	fmt.Fprintf(os.Stderr, "monitor-go1: %s: %v\n", what, err)
	os.Exit(1)
}

func monitor(args []string) {
	secs, err1 := strconv.ParseFloat(args[1], 64)
	hbms, err2 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "monitor-go1: bad SECONDS or HEARTBEAT_MS")
		os.Exit(2)
	}
	h := &heartbeats{n: map[string]int{"started": 0, "succeeded": 0, "awaited": 0, "failed": 0}}
	mon := &event.ServerMonitor{
		ServerHeartbeatStarted: func(*event.ServerHeartbeatStartedEvent) { h.add("started") },
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			h.add("succeeded")
			if e.Awaited {
				h.add("awaited")
			}
		},
		ServerHeartbeatFailed: func(*event.ServerHeartbeatFailedEvent) { h.add("failed") },
	}
	ctx := context.Background()
	client, err := mongo.Connect(ctx, options.Client().ApplyURI(args[0]).SetServerMonitor(mon).
		SetHeartbeatInterval(time.Duration(hbms)*time.Millisecond).
		SetServerSelectionTimeout(5*time.Second))
	if err != nil {
		monitorFail("connect", err)
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		monitorFail("ping", err)
	}
	h.setCounting(true)
	time.Sleep(time.Duration(secs * float64(time.Second)))
	h.setCounting(false)
	out := map[string]interface{}{"driver": "go1 " + version.Driver}
	h.mu.Lock()
	for k, v := range h.n {
		out[k] = v
	}
	h.mu.Unlock()
	_ = client.Disconnect(ctx)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
