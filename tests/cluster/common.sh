# What the cluster tests share (sourced): the text they train on and the tiny model's options.

# data.txt in the current folder: 24 000 words of a 16-word vocabulary, the same every time.
write_training_text() {
  python3 -c "
import random
random.seed(7)
words = 'the cat sat on a mat and ran to see what dog was doing in yard'.split()
open('data.txt', 'w').write(' '.join(random.choice(words) for _ in range(24000)))"
}

# A 2-layer model of width 32 at a constant learning rate, so that runs of any length take the
# same steps.
tiny_model="--data data.txt --layers 2 --heads 2 --embd 32 --seq-len 32 --lr 3e-3 --val-every 0 \
--quiet --warmup 0 --min-lr-fraction 1"
