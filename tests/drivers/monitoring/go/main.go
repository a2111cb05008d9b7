// The Go driver's side of tests/drivers/monitoring (heartbeats_go):
//
//	mongoplex-monitor-go URI SECONDS HEARTBEAT_MS
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

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/version"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mongoplex-monitor-go URI SECONDS HEARTBEAT_MS")
		os.Exit(2)
	}
	secs, err1 := strconv.ParseFloat(os.Args[2], 64)
	hbms, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "monitor-go: bad SECONDS or HEARTBEAT_MS")
		os.Exit(2)
	}
	var mu sync.Mutex
	counting := false
	n := map[string]int{"started": 0, "succeeded": 0, "awaited": 0, "failed": 0}
	add := func(k string) {
		mu.Lock()
		if counting {
			n[k]++
		}
		mu.Unlock()
	}
	mon := &event.ServerMonitor{
		ServerHeartbeatStarted: func(*event.ServerHeartbeatStartedEvent) { add("started") },
		ServerHeartbeatSucceeded: func(e *event.ServerHeartbeatSucceededEvent) {
			add("succeeded")
			if e.Awaited {
				add("awaited")
			}
		},
		ServerHeartbeatFailed: func(*event.ServerHeartbeatFailedEvent) { add("failed") },
	}
	client, err := mongo.Connect(options.Client().ApplyURI(os.Args[1]).SetServerMonitor(mon).
		SetHeartbeatInterval(time.Duration(hbms) * time.Millisecond).
		SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "monitor-go: connect:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "monitor-go: ping:", err)
		os.Exit(1)
	}
	mu.Lock()
	counting = true
	mu.Unlock()
	time.Sleep(time.Duration(secs * float64(time.Second)))
	mu.Lock()
	counting = false
	out := map[string]interface{}{"driver": "go " + version.Driver}
	for k, v := range n {
		out[k] = v
	}
	mu.Unlock()
	_ = client.Disconnect(ctx)
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
