#!/usr/bin/env bash
# Regenerates the bundled sample session (venus_ros/samples/hello/input.wav) with espeak-ng + sox.
# The user asks a question, pauses for the answer, then interrupts the assistant's second turn.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/venus_ros/samples/hello/input.wav"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
say() { espeak-ng -v en-us -s 160 -w "$tmp/$1.wav" "$2"; }
say q "Hi there. Can you check the weather in Paris for me?"
say i "Sorry, one more thing."
sox -n -r 22050 -c 1 -b 16 "$tmp/lead.wav" trim 0 0.6
sox "$tmp/q.wav" "$tmp/q22.wav" rate 22050
sox "$tmp/i.wav" "$tmp/i22.wav" rate 22050
# question, then silence until 10.8 s, then the interruption, then 2.5 s of silence
qlen=$(soxi -D "$tmp/q22.wav")
gap=$(python3 -c "print(10.8 - 0.6 - $qlen)")
sox -n -r 22050 -c 1 -b 16 "$tmp/gap.wav" trim 0 "$gap"
sox -n -r 22050 -c 1 -b 16 "$tmp/tail.wav" trim 0 2.5
sox "$tmp/lead.wav" "$tmp/q22.wav" "$tmp/gap.wav" "$tmp/i22.wav" "$tmp/tail.wav" -b 16 "$out"
soxi "$out"
