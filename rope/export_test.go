package rope

import "fmt"

// Knobs are a launch's knobs (knobs), for the tuning tests of package
// rope_test.
type Knobs = knobs

// SetTuning makes every launch take k instead of pickKnobs's choice until
// the returned function restores the picker.
func SetTuning(k Knobs) (restore func()) {
	tuning = k
	return func() { tuning = knobs{} }
}

func (k knobs) String() string {
	s := fmt.Sprintf("hpt%d/threads%d/occ%d", k.hpt, k.threads, k.occ)
	if k.cs {
		s += "/cs"
	}
	if k.flat {
		s += "/flat"
	}
	if k.evict {
		s += "/evict"
	}
	return s
}

// TuneKnobs are the launch choices BenchmarkTune compares on the large
// serving cases, the picker's 3-D choice first and again last (the
// run-to-run spread).
var TuneKnobs = []Knobs{
	{hpt: 4, threads: 128, occ: 1024, cs: true},
	{hpt: 2, threads: 64, occ: 1536, cs: true},
	{hpt: 4, threads: 128, occ: 1024, cs: true, flat: true},
	{hpt: 2, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 1, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 1, threads: 128, occ: 2048, cs: true, flat: true},
	{hpt: 1, threads: 128, occ: 1536, flat: true},
	{hpt: 4, threads: 128, occ: 1024, cs: true},
}

// BHSDKnobs are the launch choices BenchmarkTune compares on the
// [B, H, S, D] cases, the picker's for data past L2 first and again last.
var BHSDKnobs = []Knobs{
	{hpt: 1, threads: 128, evict: true},
	{hpt: 1, threads: 128},
	{hpt: 1, threads: 64, evict: true},
	{hpt: 1, threads: 256, evict: true},
	{hpt: 1, threads: 512, evict: true},
	{hpt: 2, threads: 128, evict: true},
	{hpt: 1, threads: 128, evict: true, cs: true},
	{hpt: 1, threads: 128, occ: 2048, evict: true},
	{hpt: 1, threads: 128, evict: true},
}

// ParityKnobs are launch choices the parity cases do not reach through
// pickKnobs (their shapes are small): flat launches, 3-D launches with the
// flat knobs (a flat launch of more than 2³¹ threads falls back to them),
// and the L2 evict-last reads of [B, H, S, D] launches larger than L2.
var ParityKnobs = []Knobs{
	{hpt: 1, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 2, threads: 128, occ: 1536, cs: true, flat: true},
	{hpt: 4, threads: 256, flat: true},
	{hpt: 2, threads: 64, occ: 1536, cs: true},
	{hpt: 1, threads: 128, evict: true},
}
