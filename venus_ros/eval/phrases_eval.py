"""The evaluation part of the synthesizer's phrase families (written for this project).

Nothing here is ever drawn for training (``split="train"`` uses the banks in
:mod:`venus_ros.eval.synth`, which the floor policy was trained on); a test proves the two parts
share no phrase, template, name, place or voice. The assistant's answers are several sentences
long, as real answers are.
"""

from __future__ import annotations

#: Multi-sentence explanations the assistant is scripted to be speaking (6-10 s at 170 wpm).
ASSISTANT_TEXTS: tuple[str, ...] = (
    "A cast iron pan should never soak in the sink. Rinse it with hot water while it is still "
    "warm. Then dry it on the stove and rub in a drop of oil.",
    "The ferry runs every hour in summer. In winter there are only four crossings a day. The "
    "last one back leaves the island just after six.",
    "Start the seedlings indoors in March. Move them to a sheltered spot outside in May. By "
    "July the plants should be taller than your knee.",
    "Your car is due for its service next month. The garage suggested changing the brake pads "
    "too. They quoted about two hundred pounds for both jobs.",
    "The swimming pool has lanes for adults before nine. After that the children's lessons "
    "begin. On Sundays the whole pool is open to families.",
    "Most printers jam because the paper is damp. Keep the packets closed until you need them. "
    "Fan the stack gently before you load the tray.",
    "The recipe works best with ripe bananas. Mash them with a fork and fold in the flour. Bake "
    "the loaf for about fifty minutes at a medium heat.",
    "The bike path follows the canal for most of the way. There is one steep bridge near the "
    "old mill. After that it is flat all the way to the market square.",
    "Violin lessons are on Tuesday evenings at the music school. Each lesson lasts forty five "
    "minutes. The teacher asks beginners to practise a little every day.",
    "The dentist recommends brushing for two full minutes. Use a soft brush and small circles. "
    "Floss once a day, preferably before going to bed.",
    "The concert starts at half past seven. Doors open an hour earlier. Parking near the hall "
    "is limited, so the bus might be the easier choice.",
    "Your flight to Dublin boards at gate twelve. Boarding closes twenty minutes before take "
    "off. The security queue is short at this time of the morning.",
    "Wool jumpers keep their shape if you wash them cold. Lay them flat on a towel to dry. "
    "Never hang them up while they are still wet.",
    "The new phone plan includes unlimited calls. Data is capped at thirty gigabytes a month. "
    "You can cancel it at any time without a fee.",
    "Composting is easier than it sounds. Mix kitchen scraps with dry leaves or cardboard. Turn "
    "the heap every couple of weeks to let the air in.",
    "The art class meets in the community hall. Bring your own brushes and an apron. Paper and "
    "paint are provided by the teacher each week.",
)

BACKCHANNELS: tuple[str, ...] = (
    "mhm",
    "uh huh, yeah",
    "okay, okay",
    "yep",
    "gotcha",
    "ah, I see",
    "hm, right",
    "cool",
    "oh, nice",
    "yeah, true",
    "sure, sure",
    "alright",
    "mm, yeah",
    "fair enough",
)

INTERRUPTIONS: tuple[str, ...] = (
    "Sorry, how much does that cost in total?",
    "Wait, which day did you say?",
    "Hang on, can I do that without a car?",
    "Stop for a second, is there a cheaper way?",
    "Excuse me, what time does it close?",
    "Hold on, do I need to book in advance?",
    "Wait, wait, is it suitable for a five year old?",
    "Sorry, I meant the one on Friday, not today.",
    "Actually, can you tell me about parking instead?",
    "Just a moment, how long does the whole thing take?",
    "No, sorry, I'm asking about the blue model.",
    "Hang on, what's the phone number for them?",
    "Wait, can I bring my dog along?",
    "Sorry to interrupt, where exactly is it?",
    "Hmm, stop, does it work in the rain?",
    "Hold on, is there a version without gluten?",
    "Sorry, can you spell the name of the street?",
    "Wait, what happens if I'm late?",
    # short commands
    "Wait wait.",
    "Hang on.",
    "No, stop.",
    "Enough.",
    "Stop there.",
    "Hold up.",
    "Shh, wait.",
    "Not now, stop.",
)

#: Names for remarks aimed at someone else (an open list, disjoint from the training names).
OTHER_NAMES: tuple[str, ...] = (
    "Oliver",
    "Grace",
    "Mateo",
    "Hannah",
    "Kofi",
    "Elena",
    "Yusuf",
    "Chloe",
    "Ravi",
    "Ingrid",
    "Tariq",
    "Beatriz",
)

VOCATIVES: tuple[str, ...] = (
    "{name}, can you get the door?",
    "{name}, the soup is boiling over!",
    "{name}, put your shoes on, we're late.",
    "Hey {name}, where did you put the scissors?",
    "{name}, could you bring the laundry in?",
    "{name}, your friend is on the phone.",
    "{name}, turn off the tap, please.",
    "Oi, {name}, pass me the charger.",
)

SIDE_COMMENTS: tuple[str, ...] = (
    "Ouch, I just stubbed my toe.",
    "Oh, the washing machine finished.",
    "Hmm, where are my headphones?",
    "Ugh, this lid won't come off.",
    "Oh dear, the milk has gone off.",
    "Whoops, I dropped a spoon.",
    "Wait, is that the neighbour's car alarm?",
    "Goodness, it's cold in here.",
)

#: One side of a phone call in the room (idle samples).
PHONE_TALK: tuple[str, ...] = (
    "No, Mum, I'll ring you after dinner.",
    "Sure, put me down for two tickets.",
    "He's fine, just a bit of a cold.",
    "Is that so? I had no idea they moved.",
    "Right, I'll be there by half past.",
    "Can you hear me now? The signal is terrible.",
)

BACKGROUND_TALK: tuple[str, ...] = (
    "Did you remember to water the plants before we left?",
    "I'm not sure the shop is open on bank holidays.",
    "She said the train was cancelled again this morning.",
    "Let's order pizza tonight, I can't be bothered to cook.",
    "The plumber is coming round on Thursday at ten.",
    "Have you seen how much the rent went up?",
    "I think we need a bigger table for the party.",
    "He's been learning Spanish for about a year now.",
)

BACKGROUND_TV: tuple[str, ...] = (
    "Coming up after the news, a look back at the year in sport.",
    "Heavy snow is expected across the hills overnight, with icy roads by morning.",
    "And he shoots from the edge of the box, just wide of the post!",
    "The minister said the new rail line would open within three years.",
    "Call now and get a second blender absolutely free.",
    "Our reporter is live outside the courthouse with the latest.",
    "Tonight's quiz winner takes home a brand new car.",
    "Experts warn that the heatwave could last well into next week.",
)

PAUSED_SENTENCES: tuple[tuple[str, str], ...] = (
    ("Could you find me a good", "place for breakfast near the harbour?"),
    ("I want to know whether", "it's too late to plant garlic this year."),
    ("My neighbour asked me to", "look after her rabbit for a week."),
    ("Is there any way to", "make the living room a bit warmer?"),
    ("I keep forgetting what", "the doctor said about my knee."),
    ("We're thinking of going to", "the coast for the long weekend."),
    ("How do I explain to my son", "why we can't get a puppy yet?"),
    ("I'd like to try", "a vegetarian recipe with lentils tonight."),
    ("Can you help me write a", "short thank you note to my aunt?"),
    ("What's the quickest way to", "get rid of fruit flies in the kitchen?"),
)

QUESTIONS: tuple[str, ...] = (
    "What's the tallest mountain in Africa?",
    "How do I stop my glasses from fogging up?",
    "Why do cats purr?",
    "What's a good board game for four players?",
    "How long does it take to walk five kilometres?",
    "Can you suggest a name for a vegetable garden club?",
    "What's the difference between weather and climate?",
    "How do I make my bread crust crispier?",
    "Why does the moon look bigger near the horizon?",
    "What can I cook with leftover rice?",
    "How many teaspoons are in a tablespoon?",
    "Is it better to stretch before or after exercise?",
)

DELEGATE_YES: tuple[str, ...] = (
    "Could you check whether the back door is locked?",
    "Fetch my slippers from the bedroom, please.",
    "Will it rain in Manchester this weekend?",
    "What was the final score of the rugby yesterday?",
    "What did the plumber say when he came on Monday?",
    "Where did I put the spare car key last time?",
    "Find a vet near here that is open on Saturday and check their prices.",
    "Work out the fastest way to the hospital at rush hour.",
    "Look up when the next bus to the town centre leaves.",
    "Please vacuum under the dining table.",
    "Move my dentist appointment to the week after next.",
    "How much is a return ticket to Edinburgh tomorrow?",
    "Remind me which wine my father said he liked.",
    "Go and check if the baby is still asleep.",
    "Text Grace that dinner will be an hour late.",
    "Compare the prices of the three cheapest washing machines online.",
    "Is the hardware store on the high street open right now?",
    "Take the rubbish out to the bins by the gate.",
    "Has my parcel from the bookshop been shipped yet?",
    "Book a table for six at the Thai place for Friday night.",
)

DELEGATE_NO: tuple[str, ...] = (
    "Hello, nice to meet you.",
    "Good evening!",
    "That's everything, thank you.",
    "Alright, perfect.",
    "Yes, that's right.",
    "No thanks, I'm fine.",
    "Say something cheerful.",
    "Ha, you're funny.",
    "Could you say that once more?",
    "How old are you?",
    "And the next one?",
    "Brilliant, cheers.",
    "I had a long day at work.",
    "Sleep well, talk tomorrow.",
    "Okay, carry on.",
    "That sounds wonderful.",
    "Can you keep it short?",
    "Lovely, I like that.",
    "Oh, I didn't know that.",
    "Mm, let me think about it.",
)

FILLERS: tuple[str, ...] = ("erm", "you know", "well, um", "ah", "let me see", "uh, so")
LOCATIONS: tuple[str, ...] = ("pantry", "utility room", "porch", "study", "landing", "balcony")
OBJECTS: tuple[str, ...] = (
    "green bottle",
    "yellow towel",
    "tablet",
    "wallet",
    "umbrella",
    "tennis ball",
    "glasses case",
    "torch",
)
ROOMS: tuple[str, ...] = ("dining room", "nursery", "study", "guest room", "conservatory")
#: City -> IANA zone for clock requests.
ZONES: tuple[tuple[str, str], ...] = (
    ("Berlin", "Europe/Berlin"),
    ("Chicago", "America/Chicago"),
    ("Singapore", "Asia/Singapore"),
    ("Cairo", "Africa/Cairo"),
    ("Toronto", "America/Toronto"),
    ("Mexico City", "America/Mexico_City"),
)
OPS: tuple[tuple[str, str], ...] = (
    ("add", "+"),
    ("take away", "-"),
    ("multiplied by", "*"),
    ("over", "/"),
)
#: espeak-ng voices of the evaluation part (none of them is a training voice).
ESPEAK_VOICES: tuple[str, ...] = (
    "en-us+m1",
    "en-us+m5",
    "en-us+f1",
    "en-us+f5",
    "en+m6",
    "en+f2",
    "en-us+Andy",
    "en-us+Annie",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-029+m2",
    "en+Michael",
    "en-us+klatt",
)
