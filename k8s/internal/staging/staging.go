// Package staging is the docker staging service (k8s/README.md, "Packages and the rules that
// make them last": layer 5). Stage records a staging as a Secret before POST /stage answers; Run,
// the leader's work, reads each recorded image's configuration, delivers the result to CC and
// deletes the record. It is built with its settings (Options) and, apart from them, its
// dependencies (Deps: the Kubernetes client, the image reader, the notifier); it never sees the
// root package.
package staging

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// A docker staging is recorded, before POST /stage answers 202, as one Secret (it holds
// registry credentials) named "staging-<staging guid>" with the labels below. The leader's
// staging worker reads the image's configuration, delivers the result to CC and deletes the
// Secret once CC's callback is settled: what is still owed to CC is exactly the Secrets that
// exist, and survives a restart or a change of leader.
const (
	// SourceTypeStaging marks staging records (opi-bridge.io/source-type).
	SourceTypeStaging = "STG"
	// LabelStagingGUID holds the staging guid.
	LabelStagingGUID = "opi-bridge.io/staging-guid"
	// AnnotationAcceptedAt is when opi accepted the staging (RFC 3339, nanoseconds): the
	// callback's delivery bound counts from it.
	AnnotationAcceptedAt = names.AnnotationPrefix + "accepted-at"
	// AnnotationStagingAttempts counts the reads of the image begun for a record: the worker
	// raises it before each read starts, so that a read that kills opi (out of memory) is
	// counted too and the next leader sees it.
	AnnotationStagingAttempts = names.AnnotationPrefix + "staging-attempts"

	namePrefix = "staging-"

	// Keys of the staging Secret's data.
	keyImage       = "image"
	keyCallbackURL = "callback-url"
	keyServer      = "registry-server"
	keyUsername    = "registry-username"
	keyPassword    = "registry-password"
)

// DefaultWorkers is how many stagings the leader works on at once. A worker may wait long on
// an unresponsive registry or CC (each bounded), so there are a few.
const DefaultWorkers = 4

// Bounds of a staging (Options.MaxAttempts, MaxAge).
const (
	DefaultMaxAttempts = 5
	DefaultMaxAge      = 15 * time.Minute
)

// Options are the staging service's settings; a value not above zero takes its default.
type Options struct {
	// Workers is how many stagings the leader works on at once (default DefaultWorkers).
	Workers int
	// MaxAttempts and MaxAge bound a staging: a record read that many times (each attempt
	// counted on the record before its read starts), or older than that, is settled as a
	// failure without reading (defaults DefaultMaxAttempts, DefaultMaxAge). No record can
	// crash-loop opi.
	MaxAttempts int
	MaxAge      time.Duration
}

// Deps are what the staging service works with, apart from its settings. ImageReader and
// Notifier come together or not at all: with both the service is Enabled (the leader works
// off the records); with neither it only records stagings.
type Deps struct {
	Client      kubernetes.Interface
	ImageReader opi.ImageReader
	Notifier    opi.StagingNotifier
	// Lines takes the STG lines of the stagings (lines.go); nil: none.
	Lines Emitter
}

// Check refuses dependencies half given: an image reader without a notifier would record
// stagings nobody is told of, and a notifier without a reader would never have a result.
func (d Deps) Check() error {
	if (d.ImageReader == nil) != (d.Notifier == nil) {
		return errors.New("staging needs both an image reader and a staging notifier")
	}
	return nil
}

// Service records stagings and, on the leader, works them off. Create it with New.
type Service struct {
	namespace string
	logger    lager.Logger
	client    kubernetes.Interface
	reader    opi.ImageReader
	notifier  opi.StagingNotifier
	lines     Emitter
	workers   int
	bounds    bounds
}

var _ opi.Stager = (*Service)(nil)

// Config is what the staging service is set up with: its namespace and the operator's options.
type Config struct {
	Namespace string
	Options
}

// New makes the staging service of cfg's namespace. It refuses dependencies Check refuses, and
// a missing client. It makes no API calls.
func New(logger lager.Logger, cfg Config, deps Deps) (*Service, error) {
	opts := cfg.Options
	if deps.Client == nil {
		return nil, errors.New("staging needs a Kubernetes client")
	}
	if err := deps.Check(); err != nil {
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	return &Service{
		namespace: cfg.Namespace,
		logger:    logger,
		client:    deps.Client,
		reader:    deps.ImageReader,
		notifier:  deps.Notifier,
		lines:     deps.Lines,
		workers:   opts.Workers,
		bounds:    bounds{attempts: opts.MaxAttempts, age: opts.MaxAge},
	}, nil
}

// Enabled says whether the service has an image reader and a notifier, so that its leader
// work (Run) has something to do: the root runs Run only then.
func (s *Service) Enabled() bool {
	return s.reader != nil && s.notifier != nil
}

// SecretName is the name of the Secret recording a staging.
func SecretName(stagingGUID string) string { return namePrefix + stagingGUID }

// Stage records the staging as a Secret, whether or not the service is Enabled. A staging
// whose record exists (still pending) is left as it is: the call succeeds without writing.
func (s *Service) Stage(ctx context.Context, staging *opi.Staging) error {
	secret := toSecret(staging, s.namespace, time.Now())
	_, created, err := kube.CreateIfAbsent(ctx, s.client.CoreV1().Secrets(s.namespace), secret)
	if err != nil {
		return kube.APIError(err, "record staging")
	}
	s.logger.Info("staging-recorded", lager.Data{"staging-guid": staging.GUID, "secret": secret.Name, "created": created})
	return nil
}

func toSecret(s *opi.Staging, namespace string, acceptedAt time.Time) *corev1.Secret {
	data := map[string][]byte{
		keyImage:       []byte(s.Image),
		keyCallbackURL: []byte(s.CallbackURL),
	}
	if r := s.PrivateRegistry; r != nil {
		data[keyServer] = []byte(r.Server)
		data[keyUsername] = []byte(r.Username)
		data[keyPassword] = []byte(r.Password)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      SecretName(s.GUID),
			Namespace: namespace,
			Labels: map[string]string{
				LabelStagingGUID:      s.GUID,
				names.LabelAppGUID:    names.LabelValue(s.AppGUID),
				names.LabelSourceType: SourceTypeStaging,
				names.LabelManagedBy:  names.ManagedByOPI,
			},
			Annotations: map[string]string{AnnotationAcceptedAt: acceptedAt.UTC().Format(time.RFC3339Nano)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// pendingStaging is a staging record as the worker reads it back.
type pendingStaging struct {
	guid, image, callbackURL string
	// appGUID is the app's guid, from the record's label ("" when it has none).
	appGUID    string
	registry   *opi.PrivateRegistry
	acceptedAt time.Time
	// attempts is how many reads were begun (AnnotationStagingAttempts; unparsable: the bound,
	// since someone other than opi wrote it).
	attempts int
}

func fromSecret(s *corev1.Secret) (pendingStaging, error) {
	p := pendingStaging{
		guid:        s.Labels[LabelStagingGUID],
		image:       string(s.Data[keyImage]),
		callbackURL: string(s.Data[keyCallbackURL]),
		appGUID:     s.Labels[names.LabelAppGUID],
		acceptedAt:  s.CreationTimestamp.Time,
	}
	if t, err := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationAcceptedAt]); err == nil {
		p.acceptedAt = t
	}
	if v, ok := s.Annotations[AnnotationStagingAttempts]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			n = math.MaxInt32
		}
		p.attempts = n
	}
	if p.guid == "" || p.image == "" || p.callbackURL == "" {
		return p, fmt.Errorf("staging record %s lacks its guid, image or callback url", s.Name)
	}
	if user, ok := s.Data[keyUsername]; ok {
		p.registry = &opi.PrivateRegistry{
			Server:   string(s.Data[keyServer]),
			Username: string(user),
			Password: string(s.Data[keyPassword]),
		}
	}
	return p, nil
}
