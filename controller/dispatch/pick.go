package dispatch

// leastLoaded returns the index of the candidate with the least (n+1)/w, or -1 when no
// candidate has a positive weight. Ties go to the first at or after start (mod len), so that
// equal candidates take turns instead of the first one taking every tie.
func leastLoaded(w, n []float64, start int) int {
	best, bestKey := -1, 0.0
	k := len(w)
	for j := range k {
		i := (start + j) % k
		if w[i] <= 0 {
			continue
		}
		key := (max(n[i], 0) + 1) / w[i]
		if best < 0 || key < bestKey {
			best, bestKey = i, key
		}
	}
	return best
}

// smoothRR is one step of smooth weighted round-robin (as in NGINX's upstream module): each
// candidate's credit grows by its weight, the richest is chosen and pays the total. Over any
// run of Σw choices each candidate is chosen w times, spread evenly; credit carries the
// state between calls (len(w), reset by the caller when the candidates change). -1 when no
// candidate has a positive weight.
func smoothRR(w, credit []float64) int {
	best := -1
	var total float64
	for i := range w {
		if w[i] <= 0 {
			continue
		}
		credit[i] += w[i]
		total += w[i]
		if best < 0 || credit[i] > credit[best] {
			best = i
		}
	}
	if best >= 0 {
		credit[best] -= total
	}
	return best
}
