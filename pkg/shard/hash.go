package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"sort"
)

// Member is a live replica incarnation eligible for projects.
type Member struct {
	Holder string  // "<pod>/<incarnation>"
	Pod    string  // hashed, so a rejoin keeps the same projects
	Weight float64 // scales the member's share; one not ValidWeight counts as 1
}

// Rank orders members for a project by weighted rendezvous hashing, best (the owner) first.
func Rank(project string, members []Member) []Member {
	type scored struct {
		m     Member
		score float64
	}
	s := make([]scored, len(members))
	for i, m := range members {
		s[i] = scored{m, rendezvousScore(project, m)}
	}
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].score != s[j].score {
			return s[i].score > s[j].score
		}
		return s[i].m.Pod < s[j].m.Pod
	})
	out := make([]Member, len(s))
	for i := range s {
		out[i] = s[i].m
	}
	return out
}

// rendezvousScore is -w/ln(u), u uniform in (0,1) from a hash of (pod, project).
func rendezvousScore(project string, m Member) float64 {
	h := sha256.Sum256([]byte(m.Pod + "\x00" + project))
	u := (float64(binary.BigEndian.Uint64(h[:8])>>11) + 0.5) / float64(1<<53)
	w := m.Weight
	if !ValidWeight(w) {
		w = 1
	}
	return -w / math.Log(u)
}
