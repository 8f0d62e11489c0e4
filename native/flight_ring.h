// The native part of the flight recorder's ring (src/collectives/runtime/flight_recorder.py).
//
// Blocking MPI collectives run from C++ (mpi_calls.h) record themselves here instead of in the
// Python ring: a record is a few words (its index, the Python template describing the call, the
// sequence number, state and times), written without touching a Python object. Indices come
// from one counter shared with the Python ring, which merges both rings by index when read.
// Every function here is called with the GIL held: that lock orders them, so they take none.
#pragma once
#include <cstdint>
#include <vector>

namespace starling {
namespace flight {

enum State : int32_t { kStarted = 0, kCompleted = 1 };

struct Record {
  int64_t index;   // -1: empty slot
  int64_t tmpl;    // the Python ring's template id (what the call was)
  int64_t seq;
  int32_t state;
  double start;    // unix time, as Python's time.time()
  double end;
};

// Sets the capacity (>= 0; 0 turns native records off) and empties the ring.
void configure(int64_t capacity);
int64_t capacity();
// The next record index (the Python ring draws its indices here too).
int64_t next_index();
// Records the start of call ``tmpl`` (its ``seq``); returns its index, or -1 when off.
int64_t begin(int64_t tmpl, int64_t seq);
// Marks record ``index`` completed (nothing if the ring has dropped it since).
void complete(int64_t index);
// Removes record ``index`` (the Python ring takes it over); its start time in *start. False when
// the ring no longer holds it.
bool take(int64_t index, double* start);
std::vector<Record> snapshot();
void clear();
double now();

}  // namespace flight
}  // namespace starling
