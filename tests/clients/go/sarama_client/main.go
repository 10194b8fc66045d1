// A Sarama (Debian's golang-github-shopify-sarama-dev, 1.22) client for groupd's old-version tests.
// Configuration: Sarama's defaults, with Version raised to V0_10_2_0 only because Sarama's consumer
// groups refuse to start below it; so it speaks Produce v2 (magic 1 message sets), Fetch v3,
// ListOffsets v1, Metadata v1, JoinGroup v1, OffsetCommit v1 (Consumer.Offsets.Retention = 0) and
// OffsetFetch v1.
//
//	produce <bootstrap> <topic> <first> <count> [gzip]   one message "v<i>" per i, keyed "k<i>"
//	consume <bootstrap> <topic> <group>                  prints "MSG <partition> <offset> <value>" per
//	                                                     message and "ASSIGNED <n>" per session, marks
//	                                                     each one; closes the group when stdin closes
//	controller <bootstrap>                               prints the controller's id
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/Shopify/sarama"
)

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V0_10_2_0
	c.Producer.Return.Successes = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ERROR", err)
	os.Exit(1)
}

// codecs: the message-set compressions the produce command takes by name
var codecs = map[string]sarama.CompressionCodec{
	"": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4,
}

func produce(bootstrap, topic string, first, count int, codec string) {
	c := config()
	compression, ok := codecs[codec]
	if !ok {
		fail(fmt.Errorf("unknown codec %s", codec))
	}
	c.Producer.Compression = compression
	c.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer([]string{bootstrap}, c)
	if err != nil {
		fail(err)
	}
	msgs := make([]*sarama.ProducerMessage, 0, count)
	for i := first; i < first+count; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k" + strconv.Itoa(i)), Value: sarama.StringEncoder("v" + strconv.Itoa(i))})
	}
	if err := p.SendMessages(msgs); err != nil {
		fail(err)
	}
	if err := p.Close(); err != nil {
		fail(err)
	}
	fmt.Println("PRODUCED", count)
}

type handler struct{ out *sync.Mutex }

func (h handler) Setup(s sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range s.Claims() {
		n += len(ps)
	}
	h.out.Lock()
	fmt.Printf("ASSIGNED %d\n", n)
	h.out.Unlock()
	return nil
}

func (h handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.out.Lock()
		fmt.Printf("MSG %d %d %s\n", m.Partition, m.Offset, string(m.Value))
		h.out.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func consume(bootstrap, topic, group string) {
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config())
	if err != nil {
		fail(err)
	}
	go func() {
		for err := range g.Errors() {
			fmt.Fprintln(os.Stderr, "GROUP ERROR", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				cancel()
				return
			}
		}
	}()
	out := &sync.Mutex{}
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{topic}, handler{out}); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "CONSUME", err)
		}
	}
	if err := g.Close(); err != nil {
		fail(err)
	}
	fmt.Println("CLOSED")
}

func controller(bootstrap string) {
	client, err := sarama.NewClient([]string{bootstrap}, config())
	if err != nil {
		fail(err)
	}
	b, err := client.Controller()
	if err != nil {
		fail(err)
	}
	fmt.Println("CONTROLLER", b.ID())
	client.Close()
}

func main() {
	switch os.Args[1] {
	case "produce":
		first, _ := strconv.Atoi(os.Args[4])
		count, _ := strconv.Atoi(os.Args[5])
		codec := ""
		if len(os.Args) > 6 {
			codec = os.Args[6]
		}
		produce(os.Args[2], os.Args[3], first, count, codec)
	case "consume":
		consume(os.Args[2], os.Args[3], os.Args[4])
	case "controller":
		controller(os.Args[2])
	default:
		fail(fmt.Errorf("unknown command %s", os.Args[1]))
	}
}
