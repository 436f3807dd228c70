package routes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/gorouter"
)

// Records keep, per LRP, every endpoint (host, port, URI) some leader registered and has not
// unregistered for sure yet, so that the next leader unregisters what went while nobody led
// (ADR 0009). They outlive the pods, the LRP and any replica of opi.
type Records interface {
	// Load is every LRP's record, by LRP key.
	Load(ctx context.Context) (map[string][]gorouter.Registration, error)
	// Save makes regs the LRP's record; none deletes it. exists says whether the caller knows
	// of a record of the LRP (loaded or saved before), so that a new LRP's record costs one
	// create rather than a refused update and a create; a wrong guess costs one more call.
	Save(ctx context.Context, lrpKey string, regs []gorouter.Registration, exists bool) error
}

// Names of the record ConfigMaps.
const (
	// LabelRecord marks opi's route records; its value is "true".
	LabelRecord = "opi-bridge.io/routes-record"
	// recordPrefix begins each record's name, followed by a hash of the LRP key (a guid and a
	// version, whose length CC does not bound).
	recordPrefix = "opi-routes-"
	keyLRP       = "lrp"
	keyEndpoints = "endpoints"
)

// ConfigMapRecords keeps each LRP's record as one ConfigMap of namespace, without owner
// reference: it must outlive the workload and its pods. Only the leader writes them.
type ConfigMapRecords struct {
	Client    kubernetes.Interface
	Namespace string
}

// RecordName is the name of the ConfigMap holding lrpKey's record.
func RecordName(lrpKey string) string {
	sum := sha256.Sum256([]byte(lrpKey))
	return recordPrefix + hex.EncodeToString(sum[:12])
}

// Load lists the records.
func (c ConfigMapRecords) Load(ctx context.Context) (map[string][]gorouter.Registration, error) {
	list, err := c.Client.CoreV1().ConfigMaps(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelRecord + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list route records: %w", err)
	}
	out := map[string][]gorouter.Registration{}
	for _, cm := range list.Items {
		var regs []gorouter.Registration
		if err := json.Unmarshal([]byte(cm.Data[keyEndpoints]), &regs); err != nil || cm.Data[keyLRP] == "" {
			// Only opi writes them; a hand-edited one cannot say what to unregister.
			continue
		}
		out[cm.Data[keyLRP]] = append(out[cm.Data[keyLRP]], regs...)
	}
	return out, nil
}

// Save creates, replaces or (regs empty) deletes lrpKey's record: with exists an update first
// (a create if it is not found), else a create first (an update if it exists). The leader is
// its only writer, so the replacement is unconditional.
func (c ConfigMapRecords) Save(ctx context.Context, lrpKey string, regs []gorouter.Registration, exists bool) error {
	name := RecordName(lrpKey)
	client := c.Client.CoreV1().ConfigMaps(c.Namespace)
	if len(regs) == 0 {
		if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete route record: %w", err)
		}
		return nil
	}
	body, err := json.Marshal(regs)
	if err != nil {
		return fmt.Errorf("encode route record: %w", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{LabelRecord: "true"}},
		Data:       map[string]string{keyLRP: lrpKey, keyEndpoints: string(body)},
	}
	update := func() error { _, err := client.Update(ctx, cm, metav1.UpdateOptions{}); return err }
	create := func() error { _, err := client.Create(ctx, cm, metav1.CreateOptions{}); return err }
	if exists {
		if err = update(); apierrors.IsNotFound(err) {
			err = create()
		}
	} else {
		err = create()
	}
	if apierrors.IsAlreadyExists(err) {
		err = update()
	}
	if err != nil {
		return fmt.Errorf("save route record: %w", err)
	}
	return nil
}

// pair is one URI of one endpoint, what gorouter adds and removes.
type pair struct {
	host string
	port uint16
	uri  string
}

// pairs are the (endpoint, URI) pairs of regs, each with its registration (one URI, no tags:
// what an unregister needs).
type pairs map[pair]gorouter.Registration

func pairsOf(regs ...gorouter.Registration) pairs {
	out := pairs{}
	out.add(regs...)
	return out
}

func (p pairs) add(regs ...gorouter.Registration) {
	for _, r := range regs {
		for _, u := range r.URIs {
			one := r
			one.URIs, one.Tags = []string{u}, nil
			p[pair{host: r.Host, port: r.Port, uri: u}] = one
		}
	}
}

// registrations groups the pairs back, one registration per instance's endpoint, in a stable
// order (a record rewritten with the same pairs is the same object).
func (p pairs) registrations() []gorouter.Registration {
	type endpoint struct {
		host, id string
		port     uint16
	}
	byEndpoint := map[endpoint]*gorouter.Registration{}
	var order []endpoint
	for k, r := range p {
		e := endpoint{host: k.host, id: r.PrivateInstanceID, port: k.port}
		if g, ok := byEndpoint[e]; ok {
			g.URIs = append(g.URIs, k.uri)
			continue
		}
		one := r
		one.URIs = []string{k.uri}
		byEndpoint[e] = &one
		order = append(order, e)
	}
	slices.SortFunc(order, func(a, b endpoint) int {
		return cmp.Or(cmp.Compare(a.host, b.host), cmp.Compare(a.port, b.port), cmp.Compare(a.id, b.id))
	})
	out := make([]gorouter.Registration, 0, len(order))
	for _, e := range order {
		r := byEndpoint[e]
		slices.Sort(r.URIs)
		out = append(out, *r)
	}
	return out
}
