// Guards a cache against lookups of ids that do not exist (cache penetration).
//
//	example [HOST:PORT]   (default 127.0.0.1:50051)
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/bloom-server/bloom-server/client/go/bloom"
)

func main() {
	target := "127.0.0.1:50051"
	if len(os.Args) > 1 {
		target = os.Args[1]
	}
	client, err := bloom.Dial(target, bloom.Options{Token: os.Getenv("BLOOM_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	if _, err := client.Reserve(ctx, "example:user-ids", bloom.Spec{Capacity: 100_000, ErrorRate: 0.001}); err != nil {
		log.Fatal(err)
	}
	var ids [][]byte // ids that exist
	for id := 1000; id < 2000; id++ {
		ids = append(ids, []byte(strconv.Itoa(id)))
	}
	if _, err := client.Add(ctx, "example:user-ids", ids); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"1500", "424242"} {
		seen, err := client.MightContain(ctx, "example:user-ids", bloom.Strings(id))
		if err != nil {
			log.Fatal(err)
		}
		if seen[0] {
			fmt.Printf("%s: may exist, look it up\n", id)
		} else {
			fmt.Printf("%s: does not exist, skip the database\n", id)
		}
	}
}
