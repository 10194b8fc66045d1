// A segmentio/kafka-go 0.2 (Debian's golang-github-segmentio-kafka-go-dev) client for groupd's
// old-version tests, with its defaults: the writer sends Produce v2 (magic 1 message sets), the group
// reader JoinGroup v1, SyncGroup/Heartbeat/LeaveGroup v0, OffsetFetch v1, OffsetCommit v2 and Fetch v2.
//
//	write <bootstrap> <topic> <first> <count> [snappy|lz4]
//	                                            one message "v<i>" per i, keyed "k<i>"; compressed with
//	                                            kafka-go's codec (snappy: a raw block, no xerial stream)
//	read <bootstrap> <topic> <group> <count>    reads <count> messages in the group ("MSG <partition>
//	                                            <offset> <value>" each), commits them, closes
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/lz4"
	"github.com/segmentio/kafka-go/snappy"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ERROR", err)
	os.Exit(1)
}

func write(bootstrap, topic string, first, count int, codec string) {
	config := kafka.WriterConfig{Brokers: []string{bootstrap}, Topic: topic}
	switch codec {
	case "snappy":
		config.CompressionCodec = snappy.NewCompressionCodec()
	case "lz4":
		config.CompressionCodec = lz4.NewCompressionCodec()
	case "":
	default:
		fail(fmt.Errorf("unknown codec %s", codec))
	}
	w := kafka.NewWriter(config)
	msgs := make([]kafka.Message, 0, count)
	for i := first; i < first+count; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		fail(err)
	}
	if err := w.Close(); err != nil {
		fail(err)
	}
	fmt.Println("WRITTEN", count)
}

func read(bootstrap, topic, group string, count int) {
	// defaults but for shorter timeouts: 0.2's Close leaves a rejoin behind that the group waits out
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{bootstrap}, Topic: topic, GroupID: group, MaxWait: 200 * time.Millisecond,
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: time.Second,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < count; i++ {
		m, err := r.ReadMessage(ctx) // commits synchronously (CommitInterval 0)
		if err != nil {
			fail(err)
		}
		fmt.Printf("MSG %d %d %s\n", m.Partition, m.Offset, string(m.Value))
	}
	if err := r.Close(); err != nil {
		fail(err)
	}
	fmt.Println("CLOSED")
}

func main() {
	switch os.Args[1] {
	case "write":
		first, _ := strconv.Atoi(os.Args[4])
		count, _ := strconv.Atoi(os.Args[5])
		codec := ""
		if len(os.Args) > 6 {
			codec = os.Args[6]
		}
		write(os.Args[2], os.Args[3], first, count, codec)
	case "read":
		count, _ := strconv.Atoi(os.Args[5])
		read(os.Args[2], os.Args[3], os.Args[4], count)
	default:
		fail(fmt.Errorf("unknown command %s", os.Args[1]))
	}
}
